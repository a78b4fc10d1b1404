// NOTE [Peer heartbeat]: which nodes the round trips to the store call slow. The beats and the
// failure reports run across real nodes in tests/e2e/test_nodes.py.
#include "comm/peer_watch.h"

#include <gtest/gtest.h>

namespace vescale::comm::peer_watch {
namespace {

TEST(PeerWatch, ANodeWhoseEveryRankIsTenTimesSlowerIsNamed) {
  const std::vector<Trip> trips = {{0, "a", 0.2}, {1, "a", 0.4}, {2, "b", 812},
                                   {3, "b", 640}, {4, "c", 0.3}, {5, "c", 0.3}};
  const std::vector<SlowLink> slow = slow_links(trips);
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_EQ(slow[0].node, "b");
  EXPECT_EQ(slow[0].ranks, (std::vector<int>{2, 3}));
  EXPECT_DOUBLE_EQ(slow[0].ms, 640);          // its fastest rank
  EXPECT_DOUBLE_EQ(slow[0].others_ms, 0.25);  // the median of a's 0.2 and c's 0.3
  EXPECT_EQ(describe(slow[0]),
            "node b (ranks 2, 3) reaches the store in 640 ms, the other nodes in 0.2 ms");
}

TEST(PeerWatch, OneSlowRankOfANodeIsNotItsLink) {
  // A rank that paused (a busy core) is not a slow link: the node's fastest rank is fast.
  EXPECT_TRUE(slow_links({{0, "a", 0.2}, {1, "b", 900}, {2, "b", 0.5}}).empty());
}

TEST(PeerWatch, BelowFiftyMillisecondsOrTenTimesNothingIsNamed) {
  EXPECT_TRUE(slow_links({{0, "a", 0.1}, {1, "b", 40}}).empty());  // 400x, but only 40 ms
  EXPECT_TRUE(slow_links({{0, "a", 20}, {1, "b", 150}}).empty());  // 150 ms, but 7.5x
  const auto slow = slow_links({{0, "a", 20}, {1, "b", 200}});     // 10x and 200 ms
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_EQ(describe(slow[0]),
            "node b (rank 1) reaches the store in 200 ms, the other nodes in 20 ms");
}

TEST(PeerWatch, OneNodeHasNothingToCompareWith) {
  EXPECT_TRUE(slow_links({{0, "a", 500}, {1, "a", 700}}).empty());
  EXPECT_TRUE(slow_links({}).empty());
}

TEST(PeerWatch, WithoutABeatThereIsNothingToExplain) {
  // This process started no beat (no TCP store): a failed call says nothing more.
  EXPECT_EQ(explain({0, 1, 2}), "");
  EXPECT_EQ(node(), "");
  EXPECT_EQ(trip_ms(), -1);
}

}  // namespace
}  // namespace vescale::comm::peer_watch
