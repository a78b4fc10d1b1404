#include "launch/liveness.h"

#include <gtest/gtest.h>

#include "core/heartbeat.h"

namespace vescale {
namespace {

using Clock = LivenessMonitor::Clock;
using std::chrono::seconds;

/// Beats of 3 ranks once a second from t0 for `until` seconds: rank `stopped` stops after 2 s,
/// rank `stuck` keeps beating with no progress outside a collective, the others wait in one.
LivenessMonitor run(Clock::time_point t0, int until, int stopped, int stuck) {
  LivenessMonitor m(3, t0);
  for (int t = 0; t <= until; ++t) {
    for (int rank = 0; rank < 3; ++rank) {
      if (rank == stopped && t > 2) continue;
      const bool waits = rank != stuck && rank != stopped && t > 2;
      const int progress = waits || rank == stuck ? 3 : t;  // progress stops once waiting starts
      m.on_line(rank, std::to_string(progress) + (waits ? " 1 " : " 0 ") + "20000",
                t0 + seconds(t));
    }
  }
  return m;
}

TEST(Liveness, HeartbeatLinesRoundTrip) {
  heartbeat::Beat b;
  ASSERT_TRUE(heartbeat::parse("12 1 300000", b));
  EXPECT_EQ(b.progress, 12u);
  EXPECT_EQ(b.waiting, 1);
  EXPECT_EQ(b.stall_ms, 300000);
  EXPECT_FALSE(heartbeat::parse("[rank 1] hello", b));
  {
    heartbeat::WaitScope waiting;
    EXPECT_EQ(heartbeat::current().waiting, 1);
  }
  EXPECT_EQ(heartbeat::current().waiting, 0);
}

TEST(Liveness, ASilentRankIsNamedNotTheRanksWaitingForIt) {
  const Clock::time_point t0 = Clock::now();
  const LivenessMonitor m = run(t0, 30, /*stopped=*/2, /*stuck=*/-1);
  EXPECT_FALSE(m.check(t0 + seconds(12)).has_value());  // silent for 10 s: at the limit
  const auto found = m.check(t0 + seconds(13));
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->rank, 2);
  EXPECT_NE(found->why.find("sent no heartbeat for 11.0 s"), std::string::npos) << found->why;
}

TEST(Liveness, ARankStuckOutsideACollectiveIsNamedAfterTheStallLimit) {
  const Clock::time_point t0 = Clock::now();
  const LivenessMonitor m = run(t0, 40, /*stopped=*/-1, /*stuck=*/1);
  // Its progress stood still from t0 on; the stall limit is 20 s.
  EXPECT_FALSE(m.check(t0 + seconds(19)).has_value());
  const auto found = m.check(t0 + seconds(21));
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->rank, 1);
  EXPECT_NE(found->why.find("no progress outside any collective"), std::string::npos) << found->why;
}

TEST(Liveness, ARankStuckOutsideIsBlamedAfterItsVictimsStoppedWaiting) {
  // Rank 1 stops making progress at t0; ranks 0 and 2 wait for it from 1 s on until their
  // collectives time out at 9 s: rank 2 then fails (no longer waiting), rank 0 has exited. The
  // first victim's timeout is what ends the job, and the stuck rank is named as the cause.
  const Clock::time_point t0 = Clock::now();
  LivenessMonitor m(3, t0);
  for (int t = 0; t <= 12; ++t) {
    m.on_line(1, "3 0 8000", t0 + seconds(t));
    if (t <= 9) m.on_line(0, t == 0 ? "2 0 8000" : "2 1 8000", t0 + seconds(t));
    m.on_line(2, t == 0 || t > 9 ? "2 0 8000" : "2 1 8000", t0 + seconds(t));
  }
  m.on_exit(0);
  EXPECT_FALSE(m.check(t0 + seconds(3), 0.5).has_value());  // 3 s of 4 s
  const auto found = m.check(t0 + seconds(10), 0.5);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->rank, 1);
  EXPECT_NE(found->why.find("no progress outside any collective"), std::string::npos) << found->why;
}

TEST(Liveness, NobodyIsBlamedWhileAllComputeOrAllWait) {
  const Clock::time_point t0 = Clock::now();
  LivenessMonitor m(2, t0);
  for (int t = 0; t <= 100; ++t) {
    m.on_line(0, "5 0 20000", t0 + seconds(t));  // a long compute, no collective
    m.on_line(1, "5 0 20000", t0 + seconds(t));
  }
  EXPECT_FALSE(m.check(t0 + seconds(100)).has_value());
  // An ended rank is not judged.
  m.on_exit(0);
  m.on_exit(1);
  EXPECT_FALSE(m.check(t0 + seconds(500)).has_value());
}

}  // namespace
}  // namespace vescale
