#include "comm/store.h"

#include <atomic>
#include <future>
#include <optional>
#include <string_view>
#include <thread>

#include "comm/bind_address.h"
#include "comm/c10d_compat.h"
#include "core/error.h"
#include "core/stop_signals.h"

namespace vescale::comm {
namespace {

// NOTE [TCPStore and libuv]
// LibTorch 2.4 and later make TCPStoreOptions::useLibUV true by default, and a LibTorch built
// without libuv (Debian's) then refuses to create any TCPStore, client or server. Official builds
// have libuv; whether this one does is not exported (c10d::detail::is_libuv_tcpstore_backend_
// available is a hidden symbol), so the first store asks for libuv and, when LibTorch answers
// that it was built without it, this process uses the classic TCP server from then on. Both
// speak the same protocol to clients. LibTorch 1.13 has only the classic server.
#if VESCALE_TCPSTORE_HAS_LIBUV_OPTION
std::atomic<bool> libuv_missing{false};

bool is_no_libuv_error(const c10::Error& e) {
  return std::string_view(e.what_without_backtrace()).find("without libuv") !=
         std::string_view::npos;
}
#endif

c10::intrusive_ptr<::c10d::TCPStore> make_tcp_store(const std::string& host,
                                                    ::c10d::TCPStoreOptions options) {
#if VESCALE_TCPSTORE_HAS_LIBUV_OPTION
  options.useLibUV = !libuv_missing.load();
  if (options.useLibUV) {
    try {
      return c10::make_intrusive<::c10d::TCPStore>(host, options);
    } catch (const c10::Error& e) {
      if (!is_no_libuv_error(e)) throw;
      libuv_missing.store(true);
      options.useLibUV = false;
    }
  }
#endif
  return c10::make_intrusive<::c10d::TCPStore>(host, options);
}

}  // namespace

// NOTE [Bounded rendezvous]
// c10d's TCPStore client waits without a deadline for a server that accepts its connection but
// never answers: another program listening on MASTER_PORT. So the store is made on a thread of
// its own while the caller waits at most the timeout (plus a little, so that c10d's own timeout
// error, which says more, comes first when there is one) and gives up naming the address; the
// thread is left blocked (the process is about to fail). A stop request (SIGTERM/SIGINT) during
// the wait ends it too: nothing has been trained, so there is nothing to save.
Store Store::tcp(const std::string& host, int port, int rank, int world,
                 std::chrono::milliseconds timeout, bool serve) {
  VS_CHECK(port > 0 && port < 65536, "[comm] bad rendezvous port {}", port);
  ::c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(port);
  options.isServer = serve && rank == 0;
  options.numWorkers = static_cast<std::size_t>(world);
  options.waitWorkers = true;
  options.timeout = timeout;
  using StorePtr = c10::intrusive_ptr<::c10d::TCPStore>;
  auto make = std::make_shared<std::packaged_task<StorePtr()>>([host, options] {
    // The server listens on `host` only, not on every interface (NOTE [Store bind address]).
    std::optional<BindOnlyTo> bind_only;
    if (options.isServer) bind_only.emplace(host);
    return make_tcp_store(host, options);
  });
  std::future<StorePtr> made = make->get_future();
  std::thread([make] { (*make)(); }).detach();
  const auto deadline = std::chrono::steady_clock::now() + timeout + std::chrono::seconds(5);
  const auto where = fmt::format("rank {} of {}: rendezvous at {}:{}", rank, world, host, port);
  while (made.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
    const int sig = stop_request_signal();
    if (sig != 0)
      throw Error(
          fmt::format("[comm] {}: stopped by signal {} before it completed (nothing was "
                      "trained, so nothing is saved)",
                      where, sig));
    if (std::chrono::steady_clock::now() > deadline)
      throw Error(
          fmt::format("[comm] {} failed: no answer within {}s (comm.timeout_s). Is another program "
                      "listening on port {}? Pick a free MASTER_PORT",
                      where, timeout.count() / 1000, port));
  }
  const auto failed = [&](const char* why) {
    return Error(
        fmt::format("[comm] {} failed within {}s: {}", where, timeout.count() / 1000, why));
  };
  try {
    return Store(std::make_shared<Impl>(Impl{made.get()}));
  } catch (const c10::Error& e) {  // LibTorch 2.x appends a backtrace to what()
    throw failed(e.what_without_backtrace());
  } catch (const std::exception& e) {
    throw failed(e.what());
  }
}

Store Store::tcp_client(const std::string& host, int port, std::chrono::milliseconds timeout) {
  ::c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(port);
  options.isServer = false;
  options.waitWorkers = false;
  options.timeout = timeout;
  return Store(std::make_shared<Impl>(Impl{make_tcp_store(host, options)}));
}

Store Store::in_memory() {
  return Store(std::make_shared<Impl>(Impl{c10::make_intrusive<::c10d::HashStore>()}));
}

Store Store::file(const std::string& path, int world, std::chrono::milliseconds timeout) {
  auto store = c10::make_intrusive<::c10d::FileStore>(path, world);
  store->setTimeout(timeout);
  return Store(std::make_shared<Impl>(Impl{store}));
}

Store Store::prefixed(const std::string& prefix) const {
  return Store(
      std::make_shared<Impl>(Impl{c10::make_intrusive<::c10d::PrefixStore>(prefix, impl_->store)}));
}

}  // namespace vescale::comm
