#include "comm/flight_watch.h"

#include <signal.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "core/heartbeat.h"
#include "core/stop_signals.h"

namespace vescale::comm {
namespace {

std::atomic<uint64_t> g_dump_requests{0};  // SIGUSR1s so far

void on_dump_signal(int) {
  g_dump_requests.fetch_add(1);  // lock-free: async-signal-safe
}

std::mutex g_mutex;
std::vector<std::weak_ptr<FlightRecorder>> g_watched;

constexpr auto kPoll = std::chrono::milliseconds(100);

/// Dumps on demand, and once per stop request when this process completes no collective for
/// kStuckAfterStop after it.
void watch_forever() {
  uint64_t requests_seen = 0;
  bool stop_seen = false, stuck_dumped = false;
  uint64_t progress_at_stop = 0;
  auto stop_at = std::chrono::steady_clock::now();
  while (true) {
    std::this_thread::sleep_for(kPoll);
    const uint64_t requests = g_dump_requests.load();
    if (requests != requests_seen) {
      requests_seen = requests;
      dump_watched_flights("SIGUSR1: a dump on demand");
    }
    if (stop_request_signal() == 0) {
      stop_seen = stuck_dumped = false;
      continue;
    }
    const uint64_t progress = heartbeat::current().progress;
    if (!stop_seen || progress != progress_at_stop) {
      stop_seen = true;
      progress_at_stop = progress;
      stop_at = std::chrono::steady_clock::now();
    } else if (!stuck_dumped && std::chrono::steady_clock::now() - stop_at >= kStuckAfterStop) {
      stuck_dumped = true;
      dump_watched_flights(
          "asked to stop (SIGTERM or SIGINT), and no collective completed since for 2 s");
    }
  }
}

}  // namespace

void watch_flight(const std::shared_ptr<FlightRecorder>& recorder) {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_handler = on_dump_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    ::sigaction(SIGUSR1, &action, nullptr);
    std::thread(watch_forever).detach();
  });
  std::lock_guard<std::mutex> lock(g_mutex);
  g_watched.push_back(recorder);
}

int dump_watched_flights(const std::string& reason) {
  std::vector<std::shared_ptr<FlightRecorder>> live;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    for (auto it = g_watched.begin(); it != g_watched.end();) {
      if (auto recorder = it->lock()) {
        live.push_back(std::move(recorder));
        ++it;
      } else {
        it = g_watched.erase(it);
      }
    }
  }
  int written = 0;
  for (const auto& recorder : live)
    written += recorder->dump(reason) ? 1 : 0;
  return written;
}

}  // namespace vescale::comm
