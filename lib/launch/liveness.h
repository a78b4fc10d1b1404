// The launcher's judgement of its workers' heartbeats (NOTE [Heartbeat] in core/heartbeat.h):
// which rank stopped answering, if any.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "core/heartbeat.h"

namespace vescale {

/// A rank found not answering, and why ("sent no heartbeat for 10.2 s ...").
struct Unresponsive {
  int rank = -1;
  std::string why;
};

class LivenessMonitor {
 public:
  using Clock = std::chrono::steady_clock;

  /// `nproc` ranks, started at `start`. A rank is judged only once it has sent a beat, or once
  /// another rank has waited in a collective for longer than its stall limit.
  LivenessMonitor(int nproc, Clock::time_point start);

  /// Feeds one heartbeat line of `rank` (ignored if it is not one).
  void on_line(int rank, const std::string& line, Clock::time_point now);
  /// A rank that ended is no longer judged.
  void on_exit(int rank);

  /// The rank that has stopped answering longest, if one is past its limits (scaled by `scale`:
  /// 0.5 asks who is halfway there, to blame for another rank's timeout) at `now`.
  std::optional<Unresponsive> check(Clock::time_point now, double scale = 1.0) const;

  /// The longest a rank may send no beat before it counts as stopped (its stall limit, at most
  /// this).
  static constexpr std::chrono::milliseconds kSilenceLimit{10'000};

 private:
  struct Rank {
    bool running = true;
    bool seen = false;
    heartbeat::Beat beat;
    Clock::time_point last_beat;
    Clock::time_point progress_since;  ///< when beat.progress last changed (or the start)
    std::optional<Clock::time_point> last_waited;  ///< its last beat in a collective, if any
  };
  std::vector<Rank> ranks_;
  Clock::time_point start_;
};

}  // namespace vescale
