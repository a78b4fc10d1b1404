#include "core/host_parallel.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace vescale {
namespace {

std::atomic<int> g_rank_cores{0};

}  // namespace

int rank_cores() {
  const int set = g_rank_cores.load(std::memory_order_relaxed);
  return set > 0 ? set : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

void set_rank_cores(int cores) {
  g_rank_cores.store(std::max(1, cores));
}

void host_parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& f) {
  if (n <= 0) return;
  const int64_t by_grain = (n + std::max<int64_t>(1, grain) - 1) / std::max<int64_t>(1, grain);
  const int64_t parts = std::min<int64_t>(rank_cores(), by_grain);
  if (parts <= 1) {
    f(0, n);
    return;
  }
  std::exception_ptr first_error;
  std::mutex error_mutex;
  auto run = [&](int64_t part) {
    try {
      f(n * part / parts, n * (part + 1) / parts);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!first_error) first_error = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(parts - 1));
  int64_t part = 1;
  try {
    for (; part < parts; ++part)
      threads.emplace_back(run, part);
  } catch (const std::system_error&) {
    // No thread to be had (a process or thread limit): the parts left run on this one.
  }
  for (int64_t left = part; left < parts; ++left)
    run(left);
  run(0);
  for (std::thread& t : threads)
    t.join();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace vescale
