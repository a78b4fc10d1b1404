#include "core/heartbeat.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace vescale::heartbeat {
namespace {

std::atomic<uint64_t> g_progress{0};
std::atomic<int64_t> g_waiting{0};
std::atomic<int64_t> g_stall_ms{300'000};

constexpr auto kPeriod = std::chrono::seconds(1);

void beat_forever(int fd) {
  while (true) {
    const Beat b = current();
    char line[96];
    const int n = std::snprintf(line, sizeof(line), "%" PRIu64 " %" PRId64 " %" PRId64 "\n",
                                b.progress, b.waiting, b.stall_ms);
    ssize_t written;
    do {
      written = ::write(fd, line, static_cast<size_t>(n));
    } while (written < 0 && errno == EINTR);
    if (written < 0) return;  // the launcher is gone: nobody listens
    std::this_thread::sleep_for(kPeriod);
  }
}

}  // namespace

WaitScope::WaitScope() {
  g_waiting.fetch_add(1);
}

WaitScope::~WaitScope() {
  g_progress.fetch_add(1);
  g_waiting.fetch_sub(1);
}

Beat current() {
  return {g_progress.load(), g_waiting.load(), g_stall_ms.load()};
}

void set_stall_limit(std::chrono::milliseconds limit) {
  g_stall_ms = limit.count();
}

void start_from_env() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* text = std::getenv("VESCALE_HEARTBEAT_FD");
    if (text == nullptr || *text == '\0') return;
    char* end = nullptr;
    const long fd = std::strtol(text, &end, 10);
    if (*end != '\0' || fd < 0 || ::fcntl(static_cast<int>(fd), F_GETFD) < 0) return;
    ::fcntl(static_cast<int>(fd), F_SETFD, FD_CLOEXEC);  // not inherited by what we run
    std::thread(beat_forever, static_cast<int>(fd)).detach();
  });
}

bool parse(const char* line, Beat& beat) {
  return std::sscanf(line, "%" SCNu64 " %" SCNd64 " %" SCNd64, &beat.progress, &beat.waiting,
                     &beat.stall_ms) == 3;
}

}  // namespace vescale::heartbeat
