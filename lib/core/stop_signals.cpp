#include "core/stop_signals.h"

#include <time.h>

#include <atomic>

namespace vescale {
namespace {

std::atomic<int64_t> g_first_ns{0};  ///< monotonic time of the first signal, 0 before it
std::atomic<int> g_signal{0};        ///< the first signal

}  // namespace

StopSignal note_stop_signal(int sig) {
  struct timespec now {};
  ::clock_gettime(CLOCK_MONOTONIC, &now);  // async-signal-safe
  // Never 0, which stands for "no signal yet".
  const int64_t ns = int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec + 1;
  int64_t first = 0;
  if (g_first_ns.compare_exchange_strong(first, ns)) {
    g_signal.store(sig);
    return StopSignal::kFirst;
  }
  return ns - first < kStopSignalWindowNs ? StopSignal::kSameRequest : StopSignal::kForce;
}

int stop_request_signal() {
  return g_signal.load();
}

void reset_stop_signals() {
  g_signal.store(0);
  g_first_ns.store(0);
}

}  // namespace vescale
