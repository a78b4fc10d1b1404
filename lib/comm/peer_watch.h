// Ranks on several nodes watching each other through the rendezvous store, where no launcher of
// ours watches them all (torchrun, Slurm, Open MPI).
//
// NOTE [Peer heartbeat]
// The local launcher reads every worker's heartbeat (NOTE [Heartbeat]); across nodes nothing does,
// and a failed collective only knows that it failed: "Operation timed out!" when a node is cut
// off, "Connection closed by peer [10.0.0.3]:40657" when one dies. So when the world meets in a
// TCP store, each rank runs a thread that beats there once a second, on a connection of its own:
//   - `add("vescale/peer/beat/<rank>", 1)`, a round trip: its count moves while the rank lives and
//     reaches the store, and its time is the rank's round trip to the store's node;
//   - `set("vescale/peer/trip/<rank>", µs)`, the slowest of its last 5 round trips, and once a
//     connection `set("vescale/peer/node/<rank>", host name)`.
// Readers use no clock but their own: a count that does not move in 2.5 s has stopped.
//   - A call that fails (comm/group_impl.h) appends `explain(members)`: which members stopped
//     beating, by node ("ranks 2, 3 on node 10.9.0.3 sent no heartbeat in 2.5 s: that node died
//     or is cut off"), or, when this rank's own beats no longer reach the store, that this node is
//     the one cut off. It reads through a fresh connection, bounded in time.
//   - Rank 0's thread reads every rank's round trip every 5 s and warns, once until it mends, of
//     a node whose every rank reaches the store 10 times slower than the other nodes do (and at
//     least 50 ms): a slow link (`slow_links`). Flight recorder dumps carry each rank's node and
//     round trip, so `diagnose` names the same node from the dumps.
// Costs: 2 small writes a rank a second on the store, and world reads every 5 s on rank 0.
// Limits: a round trip measures the path to the store's node, so of two nodes the slow one is the
// one that is not the store's; when the store's own node has the slow link, every other node is
// slow alike and none is named.
#pragma once

#include <string>
#include <vector>

namespace vescale::comm::peer_watch {

/// Where this rank's world meets: the TCP store's address and key prefix ("" for none).
struct Where {
  std::string store_host;
  int store_port = 0;
  std::string prefix;
  int rank = 0;
  int world = 1;
  bool serves_store = false;  ///< this process's rank 0 serves the store (Slurm, Open MPI)
};

/// Starts this process's beat (once; later calls are ignored).
void start(const Where& where);

/// For a failed call over the world ranks `members`: "; " and what the heartbeats say of them,
/// or "" when no beat runs (the local launcher, threads, one process). Takes 2.5 s.
std::string explain(const std::vector<int>& members);

/// This process's node (its host name) and the slowest of its recent round trips to the store in
/// ms (-1 when no beat runs or none has returned yet).
std::string node();
double trip_ms();

/// One rank's round trip to the store.
struct Trip {
  int rank = 0;
  std::string node;
  double ms = 0;
};

/// A node whose link is slow: its fastest rank's round trip and the median of the other nodes'.
struct SlowLink {
  std::string node;
  std::vector<int> ranks;
  double ms = 0;
  double others_ms = 0;
};

/// The nodes among `trips` whose fastest rank is >= 50 ms and >= 10x the median of the other
/// nodes' fastest ranks; none when fewer than two nodes report.
std::vector<SlowLink> slow_links(const std::vector<Trip>& trips);

/// "node 10.9.0.3 (ranks 2, 3) reaches the store in 812 ms, the other nodes in 0.4 ms".
std::string describe(const SlowLink& link);

}  // namespace vescale::comm::peer_watch
