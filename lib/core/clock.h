// Wall-clock time for logs and metrics.
#pragma once

#include <chrono>

namespace vescale {

using Clock = std::chrono::steady_clock;

/// Seconds from `start` until now.
inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace vescale
