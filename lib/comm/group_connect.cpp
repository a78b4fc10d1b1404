#include <ATen/ATen.h>

#include <cstdlib>
#include <exception>

#include "comm/group_impl.h"
#include "comm/nccl_backend.h"
#include "core/logging.h"

namespace vescale::comm {
namespace {

std::shared_ptr<::gloo::transport::Device> gloo_device(const std::string& host) {
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname) {
    return ::c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  }
  if (!host.empty()) return ::c10d::ProcessGroupGloo::createDeviceForHostname(host);
  return ::c10d::ProcessGroupGloo::createDefaultDevice();
}

// NOTE [c10d's flight recorder off]: LibTorch 2.x records every Gloo and NCCL collective in a
// flight recorder of its own (2,000 entries by default), one per process, whose first record for
// each process group inserts into a std::map before taking its lock
// (FlightRecorder::recordWithResetEnabled, PyTorch 2.11). Groups whose first collectives start
// at once on several threads, as our ranks-as-threads tests do, corrupt that map: a crash in
// std::_Rb_tree_insert_and_rebalance, 1 run in 3 of Collectives.* on the wheel. We keep our own
// recorder (NOTE [Flight recorder]), so c10d's is off unless the user sets TORCH_FR_BUFFER_SIZE
// (or TORCH_NCCL_TRACE_BUFFER_SIZE) himself. It reads them once, at its first use: before any
// process group is made, and once for all threads.
void default_c10d_flight_recorder_off() {
  static const bool once = [] {
    if (std::getenv("TORCH_FR_BUFFER_SIZE") == nullptr &&
        std::getenv("TORCH_NCCL_TRACE_BUFFER_SIZE") == nullptr)
      setenv("TORCH_FR_BUFFER_SIZE", "0", /*overwrite=*/0);
    return true;
  }();
  (void)once;
}

c10::intrusive_ptr<BackendBase> make_backend(const c10::intrusive_ptr<::c10d::Store>& store,
                                             int rank, int size, const GroupOptions& options,
                                             Backend backend) {
  default_c10d_flight_recorder_off();
  if (backend == Backend::kGloo) {
    auto gloo_options = ::c10d::ProcessGroupGloo::Options::create(options.timeout);
    gloo_options->devices.push_back(gloo_device(options.gloo_host));
    return c10::make_intrusive<::c10d::ProcessGroupGloo>(store, rank, size, gloo_options);
  }
  return detail::make_nccl_process_group(store, rank, size, options.timeout);
}

}  // namespace

// NOTE [Connect retry]
// Gloo as LibTorch 1.13 ships it gives every pair its own listening socket, and now and then a
// pair reads end-of-file while the group connects: "Connection closed by peer" on one rank,
// while its peers report success and go on with a group that is broken (seen twice in 120 runs
// of a test that connects 6 groups of 2-4 threads on loopback, and once on CI). A group must
// be whole on every member or on none, so after each attempt the members agree through the
// store: each adds its outcome to one counter (1 for a failure worth retrying, a large number
// for a timeout or our own error) and waits until all have added. Any failure makes every
// member drop its backend and connect again under a fresh prefix; a timeout, our own error or
// a third failure ends the connect on every member, each with the reason it knows. The
// agreement also keeps members from starting the next group while one still connects this one;
// with it, 650 runs of that test saw no failure at all.
void Group::Impl::connect() {
  constexpr int kAttempts = 3;
  constexpr int64_t kFatal = int64_t{1} << 32;
  for (int attempt = 1;; ++attempt) {
    const std::string attempt_prefix =
        attempt == 1 ? prefix : fmt::format("{}/attempt{}", prefix, attempt);
    auto store = c10::make_intrusive<::c10d::PrefixStore>(attempt_prefix, root_store);
    std::string error;
    std::exception_ptr own_error;  // ours, rethrown as it is once the others know
    try {
      pg = make_backend(store, rank, size, options, backend);
      if (options.on_connect_attempt) options.on_connect_attempt(options.label, rank, attempt);
    } catch (const vescale::Error& e) {
      error = e.what();
      own_error = std::current_exception();
    } catch (const c10::Error& e) {
      error = e.what_without_backtrace();
    } catch (const std::exception& e) {
      error = e.what();
    }
    const bool fatal = own_error != nullptr || is_timeout(error);
    const int64_t outcome = error.empty() ? 0 : fatal ? kFatal : 1;
    const int64_t sum = agree(store, outcome, fatal);
    if (sum == 0) return;
    pg.reset();
    const int64_t failed = sum % kFatal;
    const bool give_up = fatal || sum >= kFatal || attempt == kAttempts;
    if (give_up) {
      if (own_error) std::rethrow_exception(own_error);
      fail("connect",
           !error.empty()
               ? error
               : fmt::format("{} other member(s) failed to connect{}", failed + sum / kFatal,
                             attempt > 1 ? fmt::format(" ({} attempts)", attempt) : std::string()));
    }
    spdlog::warn("[comm] connect over {}: {}; connecting again (attempt {} of {})", describe(),
                 error.empty() ? fmt::format("{} other member(s) failed", failed) : error,
                 attempt + 1, kAttempts);
  }
}

int64_t Group::Impl::agree(const c10::intrusive_ptr<::c10d::Store>& store, int64_t outcome,
                           bool fatal) const {
  return guarded("connect", [&] {
    store->add("connect/outcome", outcome);
    store->set("connect/arrived/" + std::to_string(rank), std::vector<uint8_t>{1});
    // A member that timed out does not wait for the others: they may never come.
    if (!fatal) {
      std::vector<std::string> keys;
      for (int r = 0; r < size; ++r)
        keys.push_back("connect/arrived/" + std::to_string(r));
      store->wait(keys, options.timeout);
    }
    return store->add("connect/outcome", 0);
  });
}

}  // namespace vescale::comm
