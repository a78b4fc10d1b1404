// Rendezvous stores: where ranks find each other before they connect.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace vescale::comm {

/// A key-value store shared by the ranks of a job (c10d's TCPStore, HashStore or FileStore).
/// Cheap to copy: copies share the same store.
class Store {
 public:
  /// The TCP store of a real job: rank 0 serves on `port`, every rank connects to host:port.
  /// Collective over `world` processes.
  /// With `serve` false every rank is a client (under torchrun the agent serves the store).
  static Store tcp(const std::string& host, int port, int rank, int world,
                   std::chrono::milliseconds timeout, bool serve = true);
  /// A further connection to a running TCP store (a client: it serves nothing, waits for no
  /// worker); its calls wait at most `timeout`.
  static Store tcp_client(const std::string& host, int port, std::chrono::milliseconds timeout);
  /// An in-process store, for ranks that are threads of one process (tests).
  static Store in_memory();
  /// A store in a file, for processes on one machine without a port; waits at most `timeout`.
  static Store file(const std::string& path, int world,
                    std::chrono::milliseconds timeout = std::chrono::minutes(5));
  /// The same store with every key under `prefix` (e.g. one namespace per restart).
  Store prefixed(const std::string& prefix) const;

  struct Impl;
  const std::shared_ptr<Impl>& impl() const { return impl_; }

 private:
  explicit Store(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

}  // namespace vescale::comm
