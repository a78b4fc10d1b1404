#include <fmt/format.h>

#include <map>
#include <tuple>
#include <utility>

#include "core/error.h"
#include "parallel/pipeline/schedule.h"
#include "parallel/pipeline/schedule_events.h"

namespace vescale::pipeline {
namespace {

using detail::bwd;
using detail::bwd_i;
using detail::bwd_w;
using detail::Event;
using detail::fwd;
using detail::is_send;
using detail::matching_recv;
using detail::needs_of;
using detail::send_after;

/// Per pair of ranks (from, to), the messages between them in list order.
using Messages = std::map<std::pair<int, int>, std::vector<Action>>;

/// Throws unless the schedule has one list per rank and each of its stages on one of them.
void check_placement(const PipelineSchedule& s) {
  const int n_stages = s.stages(), pp = s.pp;
  VS_CHECK(static_cast<int>(s.ranks.size()) == pp, "[pipeline] {}: {} rank lists for pp = {}",
           s.name, s.ranks.size(), pp);
  VS_CHECK(n_stages == pp * s.virtual_stages, "[pipeline] {}: {} stages placed for pp = {} x {}",
           s.name, n_stages, pp, s.virtual_stages);
  for (int st = 0; st < n_stages; ++st)
    VS_CHECK(s.stage_rank[st] >= 0 && s.stage_rank[st] < pp, "[pipeline] {}: stage {} on rank {}",
             s.name, st, s.stage_rank[st]);
}

/// Where each action stands on its rank, and the checks of their order.
struct Positions {
  const PipelineSchedule& s;
  std::map<std::tuple<ActionKind, int, int>, int> position;

  /// Files every action, checking that it is in range, on its stage's rank and there once.
  explicit Positions(const PipelineSchedule& schedule) : s(schedule) {
    const int n_stages = s.stages(), pp = s.pp, m = s.microbatches;
    for (int r = 0; r < pp; ++r) {
      for (size_t i = 0; i < s.ranks[r].size(); ++i) {
        const Action& a = s.ranks[r][i];
        VS_CHECK(a.stage >= 0 && a.stage < n_stages && a.micro >= 0 && a.micro < m,
                 "[pipeline] {}: rank {}: {} is outside stages 0..{} and micro-batches 0..{}",
                 s.name, r, to_string(a), n_stages - 1, m - 1);
        VS_CHECK(s.stage_rank[a.stage] == r,
                 "[pipeline] {}: rank {}: {} belongs on rank {}, which holds stage {}", s.name, r,
                 to_string(a), s.stage_rank[a.stage], a.stage);
        const bool fresh = position.emplace(std::make_tuple(a.kind, a.stage, a.micro), i).second;
        VS_CHECK(fresh, "[pipeline] {}: rank {}: {} appears twice", s.name, r, to_string(a));
      }
    }
  }

  /// The index of `a` in its rank's list; -1 if it is not there.
  int pos(const Action& a) const {
    auto it = position.find(std::make_tuple(a.kind, a.stage, a.micro));
    return it == position.end() ? -1 : it->second;
  }

  /// Throws unless `first` comes before `second` on `rank`.
  void before(int rank, const Action& first, const Action& second) const {
    VS_CHECK(pos(first) < pos(second), "[pipeline] {}: rank {}: {} comes before {}", s.name, rank,
             to_string(second), to_string(first));
  }

  /// The action making the gradient of (st, mb)'s input: its B if there is one, else its I.
  Action input_grad(int st, int mb) const {
    return pos(bwd(st, mb)) >= 0 ? bwd(st, mb) : bwd_i(st, mb);
  }
};

/// Compute: one F and either one B or one I and one W per (stage, micro-batch)...
void check_compute_complete(const Positions& at) {
  const PipelineSchedule& s = at.s;
  for (int st = 0; st < s.stages(); ++st) {
    const int r = s.stage_rank[st];
    for (int mb = 0; mb < s.microbatches; ++mb) {
      const bool f = at.pos(fwd(st, mb)) >= 0, b = at.pos(bwd(st, mb)) >= 0,
                 i = at.pos(bwd_i(st, mb)) >= 0, w = at.pos(bwd_w(st, mb)) >= 0;
      VS_CHECK(f, "[pipeline] {}: rank {}: {} is missing", s.name, r, to_string(fwd(st, mb)));
      VS_CHECK(!(b && (i || w)),
               "[pipeline] {}: rank {}: {} and {}: a micro-batch's backward is either B or I and W",
               s.name, r, to_string(bwd(st, mb)), to_string(i ? bwd_i(st, mb) : bwd_w(st, mb)));
      VS_CHECK(b || (i && w), "[pipeline] {}: rank {}: {} is missing", s.name, r,
               !i && !w ? fmt::format("{} (or {} and {})", to_string(bwd(st, mb)),
                                      to_string(bwd_i(st, mb)), to_string(bwd_w(st, mb)))
                        : to_string(i ? bwd_w(st, mb) : bwd_i(st, mb)));
    }
  }
}

/// ... and each after what it needs from its own rank.
void check_compute_order(const Positions& at) {
  const PipelineSchedule& s = at.s;
  const int n_stages = s.stages();
  for (int st = 0; st < n_stages; ++st) {
    const int r = s.stage_rank[st];
    for (int mb = 0; mb < s.microbatches; ++mb) {
      const Action grad = at.input_grad(st, mb);
      at.before(r, fwd(st, mb), grad);
      if (grad.kind == ActionKind::kBackwardInput) at.before(r, grad, bwd_w(st, mb));
      if (st > 0 && s.stage_rank[st - 1] == r) at.before(r, fwd(st - 1, mb), fwd(st, mb));
      if (st + 1 < n_stages && s.stage_rank[st + 1] == r)
        at.before(r, at.input_grad(st + 1, mb), grad);
    }
  }
}

/// Communication: each send after its producer, each receive before its consumer; collects the
/// messages per pair of ranks into `sent` and `received`.
void check_messages(const Positions& at, Messages& sent, Messages& received) {
  const PipelineSchedule& s = at.s;
  const int n_stages = s.stages();
  for (int r = 0; r < s.pp; ++r) {
    for (const Action& a : s.ranks[r]) {
      if (is_compute(a.kind)) {
        if (auto send = send_after(a, s.stage_rank)) {
          VS_CHECK(at.pos(*send) >= 0, "[pipeline] {}: rank {}: {} is not followed by {}", s.name,
                   r, to_string(a), to_string(*send));
          at.before(r, a, *send);
        }
        continue;
      }
      const bool forward =
          a.kind == ActionKind::kSendActivation || a.kind == ActionKind::kRecvActivation;
      // The stage at the other end of the message.
      const int peer_stage = is_send(a.kind) ? (forward ? a.stage + 1 : a.stage - 1)
                                             : (forward ? a.stage - 1 : a.stage + 1);
      VS_CHECK(peer_stage >= 0 && peer_stage < n_stages && s.stage_rank[peer_stage] != r,
               "[pipeline] {}: rank {}: {} has no peer: {}", s.name, r, to_string(a),
               peer_stage < 0 || peer_stage >= n_stages
                   ? fmt::format("there is no stage {}", peer_stage)
                   : fmt::format("stage {} is on the same rank", peer_stage));
      const int peer = s.stage_rank[peer_stage];
      if (is_send(a.kind)) {
        sent[{r, peer}].push_back(a);
      } else {
        received[{peer, r}].push_back(a);
        at.before(r, a, forward ? fwd(a.stage, a.micro) : at.input_grad(a.stage, a.micro));
      }
    }
  }
}

/// A consumer across ranks needs its receive (the producer's send was checked above).
void check_receives_posted(const Positions& at) {
  const PipelineSchedule& s = at.s;
  for (int r = 0; r < s.pp; ++r) {
    for (const Action& a : s.ranks[r]) {
      if (!is_compute(a.kind)) continue;
      for (const auto& [event, st, mb] : needs_of(a, s.stage_rank)) {
        if (event != Event::kPostedOutput && event != Event::kPostedInputGrad) continue;
        const Action recv{
            event == Event::kPostedOutput ? ActionKind::kRecvActivation : ActionKind::kRecvGrad, st,
            mb};
        VS_CHECK(at.pos(recv) >= 0, "[pipeline] {}: rank {}: {} has no {} before it", s.name, r,
                 to_string(a), to_string(recv));
      }
    }
  }
}

/// Sends and receives between two ranks pair in order.
void check_pairing(const PipelineSchedule& s, const Messages& sent, Messages& received) {
  for (const auto& [pair, sends] : sent) {
    const auto& recvs = received[pair];
    for (size_t k = 0; k < sends.size(); ++k) {
      const Action want = matching_recv(sends[k]);
      VS_CHECK(k < recvs.size() && recvs[k] == want,
               "[pipeline] {}: rank {}: {} is message {} to rank {}, but rank {}'s receive {} "
               "from rank {} is {} (p2p messages between two ranks pair in order)",
               s.name, pair.first, to_string(sends[k]), k + 1, pair.second, pair.second, k + 1,
               pair.first, k < recvs.size() ? to_string(recvs[k]) : "missing");
    }
  }
  for (const auto& [pair, recvs] : received) {
    const size_t n_sent = sent.count(pair) ? sent.at(pair).size() : 0;
    VS_CHECK(recvs.size() <= n_sent, "[pipeline] {}: rank {}: {} has no matching send on rank {}",
             s.name, pair.second, to_string(recvs[n_sent]), pair.first);
  }
}

}  // namespace

void validate(const PipelineSchedule& s) {
  check_placement(s);
  const Positions at(s);
  check_compute_complete(at);
  check_compute_order(at);
  Messages sent, received;
  check_messages(at, sent, received);
  check_receives_posted(at);
  check_pairing(s, sent, received);
}

}  // namespace vescale::pipeline
