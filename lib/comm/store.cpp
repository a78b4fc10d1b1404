#include "comm/store.h"

#include <optional>

#include "comm/bind_address.h"
#include "comm/c10d_compat.h"
#include "core/error.h"

namespace vescale::comm {

Store Store::tcp(const std::string& host, int port, int rank, int world,
                 std::chrono::milliseconds timeout, bool serve) {
  VS_CHECK(port > 0 && port < 65536, "[comm] bad rendezvous port {}", port);
  ::c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(port);
  options.isServer = serve && rank == 0;
  options.numWorkers = static_cast<std::size_t>(world);
  options.waitWorkers = true;
  options.timeout = timeout;
  try {
    // The server listens on `host` only, not on every interface (NOTE [Store bind address]).
    std::optional<BindOnlyTo> bind_only;
    if (options.isServer) bind_only.emplace(host);
    auto store = c10::make_intrusive<::c10d::TCPStore>(host, options);
    return Store(std::make_shared<Impl>(Impl{store}));
  } catch (const std::exception& e) {
    throw Error(fmt::format("[comm] rank {} of {}: rendezvous at {}:{} failed within {}s: {}", rank,
                            world, host, port, timeout.count() / 1000, e.what()));
  }
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
