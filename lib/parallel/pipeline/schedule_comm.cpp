#include <algorithm>
#include <set>

#include "core/error.h"
#include "parallel/pipeline/schedule.h"
#include "parallel/pipeline/schedule_events.h"

namespace vescale::pipeline {
using detail::EventKey;
using detail::events_of;
using detail::matching_recv;
using detail::needs_of;
using detail::Orders;
using detail::send_after;

// NOTE [Placing receives]
// add_communication replays the compute orders in lockstep rounds: in each round every rank
// whose next compute action has its input runs it. A SEND goes right after the action that
// produced the data, and the matching RECV is appended to the peer's list in the same round, so
// it lands before the peer's compute action that needs it and after everything the peer did
// before the data could exist: as early as is safe. Sends and receives between two ranks are
// appended in the same global order, so they pair first-in first-out (NOTE [Schedule actions]).
std::vector<std::vector<Action>> add_communication(const std::vector<std::vector<Action>>& compute,
                                                   const std::vector<int>& stage_rank) {
  const size_t n = compute.size();
  Orders out(n);
  std::vector<size_t> next(n, 0);
  std::set<EventKey> done;
  auto finished = [&] {
    for (size_t r = 0; r < n; ++r)
      if (next[r] < compute[r].size()) return false;
    return true;
  };
  while (!finished()) {
    std::vector<Action> ran;
    for (size_t r = 0; r < n; ++r) {
      if (next[r] == compute[r].size()) continue;
      const Action& a = compute[r][next[r]];
      const auto needs = needs_of(a, stage_rank);
      if (std::all_of(needs.begin(), needs.end(),
                      [&](const EventKey& e) { return done.count(e); })) {
        ran.push_back(a);
        ++next[r];
      }
    }
    VS_CHECK(!ran.empty(), "[pipeline] the compute orders cannot make progress");
    // Each rank's own action (and its send) first, then the receives this round's sends need.
    std::vector<Action> added, recvs;
    for (const Action& a : ran) {
      added.push_back(a);
      if (auto send = send_after(a, stage_rank)) {
        added.push_back(*send);
        recvs.push_back(matching_recv(*send));
      }
    }
    added.insert(added.end(), recvs.begin(), recvs.end());
    for (const Action& a : added) {
      out[stage_rank[a.stage]].push_back(a);
      for (const auto& e : events_of(a))
        done.insert(e);
    }
  }
  return out;
}

}  // namespace vescale::pipeline
