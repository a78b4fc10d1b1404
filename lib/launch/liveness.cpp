#include "launch/liveness.h"

#include <fmt/format.h>

#include <algorithm>

namespace vescale {
namespace {

double seconds(LivenessMonitor::Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

LivenessMonitor::LivenessMonitor(int nproc, Clock::time_point start)
    : ranks_(static_cast<size_t>(nproc)), start_(start) {
  for (auto& r : ranks_)
    r.progress_since = start;
}

void LivenessMonitor::on_line(int rank, const std::string& line, Clock::time_point now) {
  heartbeat::Beat beat;
  if (rank < 0 || rank >= static_cast<int>(ranks_.size()) || !heartbeat::parse(line.c_str(), beat))
    return;
  Rank& r = ranks_[static_cast<size_t>(rank)];
  if (!r.seen || beat.progress != r.beat.progress) r.progress_since = now;
  r.seen = true;
  r.beat = beat;
  if (beat.waiting > 0) r.last_waited = now;
  r.last_beat = now;
}

void LivenessMonitor::on_exit(int rank) {
  if (rank >= 0 && rank < static_cast<int>(ranks_.size()))
    ranks_[static_cast<size_t>(rank)].running = false;
}

std::optional<Unresponsive> LivenessMonitor::check(Clock::time_point now, double scale) const {
  auto scaled = [scale](std::chrono::milliseconds limit) {
    return std::chrono::duration_cast<Clock::duration>(limit * scale);
  };
  bool someone_waits = false;
  std::chrono::milliseconds stall{0};
  for (const auto& r : ranks_) {
    if (!r.running || !r.seen) continue;
    someone_waits = someone_waits || r.beat.waiting > 0;
    stall = std::max(stall, std::chrono::milliseconds(r.beat.stall_ms));
  }
  // Whether a rank other than `rank` waited in a collective at or after `since`: it still waits,
  // or it waited until its collective failed and it left (the first victim of a stuck rank
  // stops waiting when its timeout fires, often before the stuck rank's own limit is up).
  auto another_waited_since = [&](size_t rank, Clock::time_point since) {
    for (size_t j = 0; j < ranks_.size(); ++j)
      if (j != rank && ranks_[j].last_waited && *ranks_[j].last_waited >= since) return true;
    return false;
  };
  std::optional<Unresponsive> found;
  Clock::duration longest{0};
  auto consider = [&](int rank, Clock::duration how_long, std::string why) {
    if (found && how_long <= longest) return;
    found = Unresponsive{rank, std::move(why)};
    longest = how_long;
  };
  for (size_t i = 0; i < ranks_.size(); ++i) {
    const Rank& r = ranks_[i];
    const int rank = static_cast<int>(i);
    if (!r.running) continue;
    if (!r.seen) {
      // It never started beating, and others have waited for it longer than they may.
      if (someone_waits && stall.count() > 0 && now - start_ > scaled(stall))
        consider(rank, now - start_,
                 fmt::format("sent no heartbeat in the {:.1f} s since it started",
                             seconds(now - start_)));
      continue;
    }
    const auto own_stall = std::chrono::milliseconds(r.beat.stall_ms);
    const auto silence_limit = std::min(own_stall, std::chrono::milliseconds(kSilenceLimit));
    if (now - r.last_beat > scaled(silence_limit)) {
      consider(rank, now - r.last_beat,
               fmt::format("sent no heartbeat for {:.1f} s (stopped, e.g. by SIGSTOP, or hung)",
                           seconds(now - r.last_beat)));
    } else if (r.beat.waiting == 0 && now - r.progress_since > scaled(own_stall) &&
               another_waited_since(i, r.progress_since)) {
      consider(rank, now - r.progress_since,
               fmt::format("has made no progress outside any collective for {:.1f} s while other "
                           "ranks wait for it in one (a hang or deadlock in compute)",
                           seconds(now - r.progress_since)));
    }
  }
  return found;
}

}  // namespace vescale
