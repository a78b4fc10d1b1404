#include "parallel/pipeline/schedule.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "core/error.h"
#include "core/suggest.h"

namespace vescale::pipeline {
namespace {

using Orders = std::vector<std::vector<Action>>;

struct KindName {
  ActionKind kind;
  const char* text;
};

constexpr KindName kKindNames[] = {
    {ActionKind::kForward, "F"},
    {ActionKind::kBackward, "B"},
    {ActionKind::kBackwardInput, "I"},
    {ActionKind::kBackwardWeight, "W"},
    {ActionKind::kSendActivation, "SEND_F"},
    {ActionKind::kRecvActivation, "RECV_F"},
    {ActionKind::kSendGrad, "SEND_B"},
    {ActionKind::kRecvGrad, "RECV_B"},
};

Action fwd(int stage, int micro) {
  return {ActionKind::kForward, stage, micro};
}
Action bwd(int stage, int micro) {
  return {ActionKind::kBackward, stage, micro};
}
Action bwd_i(int stage, int micro) {
  return {ActionKind::kBackwardInput, stage, micro};
}
Action bwd_w(int stage, int micro) {
  return {ActionKind::kBackwardWeight, stage, micro};
}

bool produces_input_grad(ActionKind kind) {
  return kind == ActionKind::kBackward || kind == ActionKind::kBackwardInput;
}

// ---------------------------------------------------------------------------------------------
// Events: what executed actions make available, and what each action needs first. The one
// definition of the data flow between actions, shared by add_communication (where receives go),
// simulate (when actions run) and, for its messages, validate.
// ---------------------------------------------------------------------------------------------

enum class Event {
  kOutput,     ///< F(s, m) finished: stage s's output of micro-batch m exists
  kInputGrad,  ///< B or I (s, m) finished: the gradient of stage s's input exists
  kWeightGrad,
  kSentOutput,       ///< SEND_F(s, m) posted
  kSentInputGrad,    ///< SEND_B(s, m) posted
  kPostedOutput,     ///< RECV_F(s, m) posted (stage s receives stage s-1's output)
  kPostedInputGrad,  ///< RECV_B(s, m) posted (stage s receives stage s+1's input gradient)
};

using EventKey = std::tuple<Event, int, int>;  // (event, stage, micro)

std::vector<EventKey> events_of(const Action& a) {
  switch (a.kind) {
    case ActionKind::kForward:
      return {{Event::kOutput, a.stage, a.micro}};
    case ActionKind::kBackward:
      return {{Event::kInputGrad, a.stage, a.micro}, {Event::kWeightGrad, a.stage, a.micro}};
    case ActionKind::kBackwardInput:
      return {{Event::kInputGrad, a.stage, a.micro}};
    case ActionKind::kBackwardWeight:
      return {{Event::kWeightGrad, a.stage, a.micro}};
    case ActionKind::kSendActivation:
      return {{Event::kSentOutput, a.stage, a.micro}};
    case ActionKind::kSendGrad:
      return {{Event::kSentInputGrad, a.stage, a.micro}};
    case ActionKind::kRecvActivation:
      return {{Event::kPostedOutput, a.stage, a.micro}};
    case ActionKind::kRecvGrad:
      return {{Event::kPostedInputGrad, a.stage, a.micro}};
  }
  return {};
}

/// The events action `a` waits for. Across ranks an input is there when the producer's rank
/// sent it and this rank posted the receive.
std::vector<EventKey> needs_of(const Action& a, const std::vector<int>& stage_rank) {
  const int s = a.stage, m = a.micro, n_stages = static_cast<int>(stage_rank.size());
  std::vector<EventKey> needs;
  // What stage `from` produced for stage s: `done` on this rank, else `sent` there and `posted`.
  auto input = [&](int from, Event done, Event sent, Event posted) {
    if (from < 0 || from >= n_stages) return;
    if (stage_rank[from] == stage_rank[s]) {
      needs.emplace_back(done, from, m);
    } else {
      needs.emplace_back(sent, from, m);
      needs.emplace_back(posted, s, m);
    }
  };
  switch (a.kind) {
    case ActionKind::kForward:
      input(s - 1, Event::kOutput, Event::kSentOutput, Event::kPostedOutput);
      break;
    case ActionKind::kBackward:
    case ActionKind::kBackwardInput:
      needs.emplace_back(Event::kOutput, s, m);
      input(s + 1, Event::kInputGrad, Event::kSentInputGrad, Event::kPostedInputGrad);
      break;
    case ActionKind::kBackwardWeight:
    case ActionKind::kSendGrad:
      needs.emplace_back(Event::kInputGrad, s, m);
      break;
    case ActionKind::kSendActivation:
      needs.emplace_back(Event::kOutput, s, m);
      break;
    case ActionKind::kRecvActivation:
    case ActionKind::kRecvGrad:
      break;
  }
  return needs;
}

std::string describe(const EventKey& e, const std::vector<int>& stage_rank) {
  const auto [event, s, m] = e;
  const int r = s >= 0 && s < static_cast<int>(stage_rank.size()) ? stage_rank[s] : -1;
  switch (event) {
    case Event::kOutput:
      return to_string(fwd(s, m));
    case Event::kInputGrad:
      return fmt::format("{} or {}", to_string(bwd(s, m)), to_string(bwd_i(s, m)));
    case Event::kWeightGrad:
      return to_string(bwd_w(s, m));
    case Event::kSentOutput:
      return fmt::format("{} on rank {}", to_string({ActionKind::kSendActivation, s, m}), r);
    case Event::kSentInputGrad:
      return fmt::format("{} on rank {}", to_string({ActionKind::kSendGrad, s, m}), r);
    case Event::kPostedOutput:
      return fmt::format("its {}", to_string({ActionKind::kRecvActivation, s, m}));
    case Event::kPostedInputGrad:
      return fmt::format("its {}", to_string({ActionKind::kRecvGrad, s, m}));
  }
  return "?";
}

/// The send that carries the output of compute action `a` to another rank, if any.
std::optional<Action> send_after(const Action& a, const std::vector<int>& stage_rank) {
  const int last = static_cast<int>(stage_rank.size()) - 1;
  if (a.kind == ActionKind::kForward && a.stage < last &&
      stage_rank[a.stage + 1] != stage_rank[a.stage])
    return Action{ActionKind::kSendActivation, a.stage, a.micro};
  if (produces_input_grad(a.kind) && a.stage > 0 && stage_rank[a.stage - 1] != stage_rank[a.stage])
    return Action{ActionKind::kSendGrad, a.stage, a.micro};
  return std::nullopt;
}

/// The receive that matches `send` (on the peer stage).
Action matching_recv(const Action& send) {
  if (send.kind == ActionKind::kSendActivation)
    return {ActionKind::kRecvActivation, send.stage + 1, send.micro};
  return {ActionKind::kRecvGrad, send.stage - 1, send.micro};
}

bool is_send(ActionKind k) {
  return k == ActionKind::kSendActivation || k == ActionKind::kSendGrad;
}

// ---------------------------------------------------------------------------------------------
// Generators: compute-only orders per rank.
// ---------------------------------------------------------------------------------------------

/// GPipe: every forward, then every backward.
Orders gpipe_order(int pp, int m) {
  Orders orders(pp);
  for (int r = 0; r < pp; ++r) {
    for (int i = 0; i < m; ++i)
      orders[r].push_back(fwd(r, i));
    for (int i = 0; i < m; ++i)
      orders[r].push_back(bwd(r, i));
  }
  return orders;
}

/// 1F1B (PipeDream-flush): rank r runs pp−1−r forwards, then alternates one forward and one
/// backward, then drains the backwards; at most pp−r micro-batches are in flight on it.
Orders one_f_one_b_order(int pp, int m) {
  Orders orders(pp);
  for (int r = 0; r < pp; ++r) {
    const int warmup = std::min(pp - 1 - r, m);
    for (int i = 0; i < warmup; ++i)
      orders[r].push_back(fwd(r, i));
    for (int i = 0; i + warmup < m; ++i) {
      orders[r].push_back(fwd(r, i + warmup));
      orders[r].push_back(bwd(r, i));
    }
    for (int i = m - warmup; i < m; ++i)
      orders[r].push_back(bwd(r, i));
  }
  return orders;
}

/// Megatron-LM's interleaved 1F1B: rank r holds stages r, r+pp, ...; micro-batches go through
/// them in groups of pp. The k-th forward of a rank is micro-batch (k / (pp·v))·pp + k mod pp on
/// its local stage (k mod pp·v) / pp; backwards walk the local stages in reverse. Warmup is
/// 2·(pp−1−r) + (v−1)·pp forwards (all of them if that is more), then one forward and one
/// backward alternate.
Orders interleaved_order(int pp, int v, int m) {
  const int total = m * v;
  auto local = [&](int k, bool forward) {
    const int chunk = (k % (pp * v)) / pp;
    return forward ? chunk : v - 1 - chunk;
  };
  auto micro = [&](int k) { return (k / (pp * v)) * pp + k % pp; };
  Orders orders(pp);
  for (int r = 0; r < pp; ++r) {
    auto forward = [&](int k) { return fwd(local(k, true) * pp + r, micro(k)); };
    auto backward = [&](int k) { return bwd(local(k, false) * pp + r, micro(k)); };
    const int warmup = std::min(total, 2 * (pp - 1 - r) + (v - 1) * pp);
    for (int k = 0; k < warmup; ++k)
      orders[r].push_back(forward(k));
    for (int k = 0; k + warmup < total; ++k) {
      orders[r].push_back(forward(k + warmup));
      orders[r].push_back(backward(k));
    }
    for (int k = total - warmup; k < total; ++k)
      orders[r].push_back(backward(k));
  }
  return orders;
}

/// ZB-V (Qi et al., "Zero Bubble Pipeline Parallelism", §6; the order of torch's
/// ScheduleZBVZeroBubble): rank r holds stage r ("down") and stage 2·pp−1−r ("up"). The order
/// is built for max(m, 2·pp−1) micro-batches, then those beyond m are dropped:
///   1. 2·(pp−r)−1 forwards of down;
///   2. r times: a forward of up, a forward of down;
///   3. pp−r times: a forward of up, then its I and W;
///   4. until both forwards are done: a forward of down (while any are left), I and W of down,
///      a forward of up, I and W of up;
///   5. r times: I of down, I of up (their W wait);
///   6. pp−r times: I of down and the oldest waiting W of down;
///   7. the waiting W of up, then of down.
Orders zbv_order(int pp, int m) {
  const int padded = std::max(m, 2 * pp - 1), n_stages = 2 * pp;
  Orders orders(pp);
  for (int r = 0; r < pp; ++r) {
    const int down = r, up = n_stages - 1 - r;
    int f_down = 0, f_up = 0, i_down = 0, i_up = 0;
    std::vector<Action>& out = orders[r];
    auto add = [&](const Action& a) {
      if (a.micro < m) out.push_back(a);
    };
    for (int k = 0; k < 2 * (pp - r) - 1; ++k)
      add(fwd(down, f_down++));
    for (int k = 0; k < r; ++k) {
      add(fwd(up, f_up++));
      add(fwd(down, f_down++));
    }
    for (int k = 0; k < pp - r; ++k) {
      add(fwd(up, f_up++));
      add(bwd_i(up, i_up));
      add(bwd_w(up, i_up++));
    }
    while (f_up < f_down || f_down < padded) {
      if (f_down < padded) add(fwd(down, f_down++));
      add(bwd_i(down, i_down));
      add(bwd_w(down, i_down++));
      add(fwd(up, f_up++));
      add(bwd_i(up, i_up));
      add(bwd_w(up, i_up++));
    }
    int w_down = i_down, w_up = i_up;
    for (int k = 0; k < r; ++k) {
      add(bwd_i(down, i_down++));
      add(bwd_i(up, i_up++));
    }
    for (int k = 0; k < pp - r; ++k) {
      add(bwd_i(down, i_down++));
      add(bwd_w(down, w_down++));
    }
    while (w_up < i_up)
      add(bwd_w(up, w_up++));
    while (w_down < i_down)
      add(bwd_w(down, w_down++));
    VS_CHECK(f_down == padded && i_down == padded && w_down == padded && f_up == padded &&
                 i_up == padded && w_up == padded,
             "[pipeline] zbv order of rank {} is incomplete", r);
  }
  return orders;
}

/// ZB-H1 (Qi et al. §3): 1F1B's order and memory with each backward split into I and W. I stays
/// on the critical path and the W's fill what 1F1B spends waiting. Built by list scheduling at
/// F = I = W = 1: whenever a rank is free it runs its next I if the gradient is there, else its
/// next forward if its input is there and fewer than pp−r micro-batches are in flight (1F1B's
/// bound), else its oldest pending W. At unit costs a W never delays an I or F that becomes
/// ready, so the critical path is 1F1B's with B = I.
Orders zb_h1_order(int pp, int m) {
  const std::vector<int> stage_rank = place_stages(StagePlacement::kLoop, pp, 1);
  Orders orders(pp);
  std::vector<int> next_f(pp, 0), next_i(pp, 0), next_w(pp, 0);
  std::map<EventKey, int64_t> done_at;
  // Whether `a`'s input exists at `now` (a message counts as there when its producer is done).
  auto ready = [&](const Action& a, int64_t now) {
    for (auto [event, st, mb] : needs_of(a, stage_rank)) {
      if (event == Event::kPostedOutput || event == Event::kPostedInputGrad) continue;
      if (event == Event::kSentOutput) event = Event::kOutput;
      if (event == Event::kSentInputGrad) event = Event::kInputGrad;
      const auto it = done_at.find({event, st, mb});
      if (it == done_at.end() || it->second > now) return false;
    }
    return true;
  };
  int64_t left = int64_t{3} * pp * m;
  for (int64_t now = 0; left > 0; ++now) {
    VS_CHECK(now <= int64_t{6} * pp * m + pp, "[pipeline] zb-h1 order makes no progress");
    for (int r = 0; r < pp; ++r) {
      std::optional<Action> pick;
      if (next_i[r] < next_f[r] && ready(bwd_i(r, next_i[r]), now)) {
        pick = bwd_i(r, next_i[r]++);
      } else if (next_f[r] < m && next_f[r] - next_i[r] < pp - r && ready(fwd(r, next_f[r]), now)) {
        pick = fwd(r, next_f[r]++);
      } else if (next_w[r] < next_i[r]) {
        pick = bwd_w(r, next_w[r]++);
      }
      if (!pick) continue;
      orders[r].push_back(*pick);
      for (const auto& e : events_of(*pick))
        done_at[e] = now + 1;
      --left;
    }
  }
  return orders;
}

// ---------------------------------------------------------------------------------------------

std::string stage_list(const std::vector<int>& stage_rank, int rank) {
  std::vector<std::string> stages;
  for (size_t s = 0; s < stage_rank.size(); ++s)
    if (stage_rank[s] == rank) stages.push_back(std::to_string(s));
  return fmt::format("{}", fmt::join(stages, ", "));
}

}  // namespace

bool is_compute(ActionKind kind) {
  return kind == ActionKind::kForward || kind == ActionKind::kBackward ||
         kind == ActionKind::kBackwardInput || kind == ActionKind::kBackwardWeight;
}

std::string to_string(const Action& a) {
  for (const auto& k : kKindNames)
    if (k.kind == a.kind) return fmt::format("{}{}{}", a.stage, k.text, a.micro);
  return "?";
}

Action parse_action(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])))
    ++i;
  size_t j = i;
  while (j < text.size() && !std::isdigit(static_cast<unsigned char>(text[j])))
    ++j;
  const std::string kind = text.substr(i, j - i), micro = text.substr(j);
  const bool digits = !micro.empty() && std::all_of(micro.begin(), micro.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c));
  });
  if (i > 0 && digits && i <= 6 && micro.size() <= 6) {
    for (const auto& k : kKindNames)
      if (kind == k.text) return {k.kind, std::stoi(text.substr(0, i)), std::stoi(micro)};
  }
  throw UserError(fmt::format(
      "[pipeline] '{}' is not an action: STAGE KIND MICRO with KIND one of F, B, I, W, SEND_F, "
      "RECV_F, SEND_B, RECV_B (e.g. 1F0, 0I1, 2SEND_B3)",
      text));
}

std::vector<int> place_stages(StagePlacement placement, int pp, int virtual_stages) {
  VS_CHECK(pp >= 1 && virtual_stages >= 1, "[pipeline] pp = {} and virtual stages = {}", pp,
           virtual_stages);
  VS_CHECK(placement == StagePlacement::kLoop || virtual_stages == 2,
           "[pipeline] a V placement holds 2 stages per rank, not {}", virtual_stages);
  std::vector<int> stage_rank(static_cast<size_t>(pp * virtual_stages));
  for (int s = 0; s < pp * virtual_stages; ++s)
    stage_rank[s] = placement == StagePlacement::kLoop || s < pp ? s % pp : 2 * pp - 1 - s;
  return stage_rank;
}

const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names = {"gpipe", "1f1b", "interleaved-1f1b", "zbv",
                                                 "zb-h1"};
  return names;
}

PipelineSchedule make_schedule(const std::string& name, int pp, int virtual_stages,
                               int microbatches) {
  const auto& names = schedule_names();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    throw UserError(fmt::format("[pipeline] unknown schedule '{}'{}; the schedules are {}", name,
                                did_you_mean(name, names), fmt::join(names, ", ")));
  }
  const int p = pp, v = virtual_stages, m = microbatches;
  VS_USER_CHECK(p >= 1 && v >= 1 && m >= 1,
                "[pipeline] {} needs pp, virtual stages and micro-batches of at least 1, got pp = "
                "{}, parallel.pp_virtual = {}, micro-batches = {}",
                name, p, v, m);
  PipelineSchedule s;
  s.name = name;
  s.pp = p;
  s.virtual_stages = v;
  s.microbatches = m;
  Orders compute;
  if (name == "gpipe" || name == "1f1b" || name == "zb-h1") {
    VS_USER_CHECK(v == 1,
                  "[pipeline] {} needs parallel.pp_virtual = 1 (one stage per rank), got {}; "
                  "interleaved-1f1b runs several",
                  name, v);
    VS_USER_CHECK(name == "gpipe" || m >= p,
                  "[pipeline] {} needs at least pp = {} micro-batches, got {}", name, p, m);
    s.stage_rank = place_stages(StagePlacement::kLoop, p, 1);
    compute = name == "gpipe"  ? gpipe_order(p, m)
              : name == "1f1b" ? one_f_one_b_order(p, m)
                               : zb_h1_order(p, m);
  } else if (name == "interleaved-1f1b") {
    VS_USER_CHECK(v >= 2,
                  "[pipeline] interleaved-1f1b needs parallel.pp_virtual >= 2 stages per rank, "
                  "got {}; with 1 use 1f1b",
                  v);
    VS_USER_CHECK(m % p == 0,
                  "[pipeline] interleaved-1f1b needs micro-batches divisible by pp = {}, got {}", p,
                  m);
    s.stage_rank = place_stages(StagePlacement::kLoop, p, v);
    compute = interleaved_order(p, v, m);
  } else {  // zbv
    VS_USER_CHECK(v == 2,
                  "[pipeline] zbv needs parallel.pp_virtual = 2 (two stages per rank), got {}", v);
    VS_USER_CHECK(m >= p, "[pipeline] zbv needs at least pp = {} micro-batches, got {}", p, m);
    s.stage_rank = place_stages(StagePlacement::kV, p, 2);
    compute = zbv_order(p, m);
  }
  s.ranks = add_communication(compute, s.stage_rank);
  validate(s);
  return s;
}

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

void validate(const PipelineSchedule& s) {
  const int n_stages = s.stages(), pp = s.pp, m = s.microbatches;
  VS_CHECK(static_cast<int>(s.ranks.size()) == pp, "[pipeline] {}: {} rank lists for pp = {}",
           s.name, s.ranks.size(), pp);
  VS_CHECK(n_stages == pp * s.virtual_stages, "[pipeline] {}: {} stages placed for pp = {} x {}",
           s.name, n_stages, pp, s.virtual_stages);
  for (int st = 0; st < n_stages; ++st)
    VS_CHECK(s.stage_rank[st] >= 0 && s.stage_rank[st] < pp, "[pipeline] {}: stage {} on rank {}",
             s.name, st, s.stage_rank[st]);

  // Where each action stands on its rank.
  std::map<std::tuple<ActionKind, int, int>, int> position;
  for (int r = 0; r < pp; ++r) {
    for (size_t i = 0; i < s.ranks[r].size(); ++i) {
      const Action& a = s.ranks[r][i];
      VS_CHECK(a.stage >= 0 && a.stage < n_stages && a.micro >= 0 && a.micro < m,
               "[pipeline] {}: rank {}: {} is outside stages 0..{} and micro-batches 0..{}", s.name,
               r, to_string(a), n_stages - 1, m - 1);
      VS_CHECK(s.stage_rank[a.stage] == r,
               "[pipeline] {}: rank {}: {} belongs on rank {}, which holds stage {}", s.name, r,
               to_string(a), s.stage_rank[a.stage], a.stage);
      const bool fresh = position.emplace(std::make_tuple(a.kind, a.stage, a.micro), i).second;
      VS_CHECK(fresh, "[pipeline] {}: rank {}: {} appears twice", s.name, r, to_string(a));
    }
  }
  auto pos = [&](const Action& a) {
    auto it = position.find(std::make_tuple(a.kind, a.stage, a.micro));
    return it == position.end() ? -1 : it->second;
  };
  auto before = [&](int rank, const Action& first, const Action& second) {
    VS_CHECK(pos(first) < pos(second), "[pipeline] {}: rank {}: {} comes before {}", s.name, rank,
             to_string(second), to_string(first));
  };

  // Compute: one F and either one B or one I and one W per (stage, micro-batch)...
  for (int st = 0; st < n_stages; ++st) {
    const int r = s.stage_rank[st];
    for (int mb = 0; mb < m; ++mb) {
      const bool f = pos(fwd(st, mb)) >= 0, b = pos(bwd(st, mb)) >= 0, i = pos(bwd_i(st, mb)) >= 0,
                 w = pos(bwd_w(st, mb)) >= 0;
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
  // ... and each after what it needs from its own rank.
  auto input_grad = [&](int st, int mb) {
    return pos(bwd(st, mb)) >= 0 ? bwd(st, mb) : bwd_i(st, mb);
  };
  for (int st = 0; st < n_stages; ++st) {
    const int r = s.stage_rank[st];
    for (int mb = 0; mb < m; ++mb) {
      const Action grad = input_grad(st, mb);
      before(r, fwd(st, mb), grad);
      if (grad.kind == ActionKind::kBackwardInput) before(r, grad, bwd_w(st, mb));
      if (st > 0 && s.stage_rank[st - 1] == r) before(r, fwd(st - 1, mb), fwd(st, mb));
      if (st + 1 < n_stages && s.stage_rank[st + 1] == r) before(r, input_grad(st + 1, mb), grad);
    }
  }

  // Communication: each send after its producer, each receive before its consumer, matched.
  std::map<std::pair<int, int>, std::vector<Action>> sent, received;  // (from, to) -> in order
  for (int r = 0; r < pp; ++r) {
    for (const Action& a : s.ranks[r]) {
      if (is_compute(a.kind)) {
        if (auto send = send_after(a, s.stage_rank)) {
          VS_CHECK(pos(*send) >= 0, "[pipeline] {}: rank {}: {} is not followed by {}", s.name, r,
                   to_string(a), to_string(*send));
          before(r, a, *send);
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
        before(r, a, forward ? fwd(a.stage, a.micro) : input_grad(a.stage, a.micro));
      }
    }
  }
  // A consumer across ranks needs its receive (the producer's send was checked above).
  for (int r = 0; r < pp; ++r) {
    for (const Action& a : s.ranks[r]) {
      if (!is_compute(a.kind)) continue;
      for (const auto& [event, st, mb] : needs_of(a, s.stage_rank)) {
        if (event != Event::kPostedOutput && event != Event::kPostedInputGrad) continue;
        const Action recv{
            event == Event::kPostedOutput ? ActionKind::kRecvActivation : ActionKind::kRecvGrad, st,
            mb};
        VS_CHECK(pos(recv) >= 0, "[pipeline] {}: rank {}: {} has no {} before it", s.name, r,
                 to_string(a), to_string(recv));
      }
    }
  }
  // Sends and receives between two ranks pair in order.
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

Simulation simulate(const PipelineSchedule& s, int64_t f_cost, int64_t b_cost) {
  const int pp = s.pp;
  const int64_t i_cost = b_cost / 2, w_cost = b_cost - i_cost;
  auto cost = [&](ActionKind k) -> int64_t {
    switch (k) {
      case ActionKind::kForward:
        return f_cost;
      case ActionKind::kBackward:
        return b_cost;
      case ActionKind::kBackwardInput:
        return i_cost;
      case ActionKind::kBackwardWeight:
        return w_cost;
      default:
        return 0;
    }
  };
  Simulation sim;
  sim.busy.assign(pp, 0);
  sim.runs.assign(pp, {});
  sim.peak_stashed.assign(s.stages(), 0);
  std::vector<int> stashed(s.stages(), 0);
  std::vector<int64_t> clock(pp, 0);
  std::vector<size_t> next(pp, 0);
  std::map<EventKey, int64_t> done_at;

  // Times follow from the data flow alone, so any order of running ready actions gives them.
  bool progress = true;
  while (progress) {
    progress = false;
    for (int r = 0; r < pp; ++r) {
      while (next[r] < s.ranks[r].size()) {
        const Action& a = s.ranks[r][next[r]];
        int64_t start = clock[r];
        bool ready = true;
        for (const auto& e : needs_of(a, s.stage_rank)) {
          auto it = done_at.find(e);
          if (it == done_at.end()) {
            ready = false;
            break;
          }
          start = std::max(start, it->second);
        }
        if (!ready) break;
        const int64_t end = start + cost(a.kind);
        for (const auto& e : events_of(a))
          done_at[e] = end;
        if (is_compute(a.kind)) {
          clock[r] = end;
          sim.busy[r] += end - start;
          sim.runs[r].push_back({a, start, end});
        }
        if (a.kind == ActionKind::kForward)
          sim.peak_stashed[a.stage] = std::max(sim.peak_stashed[a.stage], ++stashed[a.stage]);
        if (produces_input_grad(a.kind)) --stashed[a.stage];
        ++next[r];
        progress = true;
      }
    }
  }
  sim.deadlock_free = true;
  for (int r = 0; r < pp; ++r) {
    sim.makespan = std::max(sim.makespan, clock[r]);
    if (next[r] == s.ranks[r].size()) continue;
    sim.deadlock_free = false;
    const Action& a = s.ranks[r][next[r]];
    std::vector<std::string> missing;
    for (const auto& e : needs_of(a, s.stage_rank))
      if (!done_at.count(e)) missing.push_back(describe(e, s.stage_rank));
    sim.stuck.push_back(
        fmt::format("rank {}: {} waits for {}", r, to_string(a), fmt::join(missing, " and ")));
  }
  int64_t busy = 0;
  for (int64_t b : sim.busy)
    busy += b;
  const double area = static_cast<double>(pp) * static_cast<double>(sim.makespan);
  sim.bubble = area > 0 ? (area - static_cast<double>(busy)) / area : 0.0;
  return sim;
}

// NOTE [Analytic bubbles]
// With F = 1 and B = 2 per stage (I = W = 1) each rank is busy v·m·(F+B) = 3·v·m:
//   gpipe, 1f1b: (p−1)(F+B) idle per rank, so (p−1)/(m+p−1) (GPipe; Narayanan et al. 2021).
//   interleaved-1f1b: the fill and drain shrink v-fold in whole-rank units: (p−1)/(v·m+p−1).
//   zb-h1: (p−1)(F+I−W) idle per rank (Qi et al. 2024, table 3), p−1 at these costs:
//     (p−1)/(3m+p−1).
//   zbv: the paper's (p−1)(F+I−2W) counts whole-rank costs (F = I = W = 2 for two stages) and
//     says 0, but it leaves out the fill: rank p−1 holds stages p−1 and p, so it cannot start
//     before p−1 forwards have run, and then has 6m to do. That gives a lower bound for any
//     order on the V placement, (p−1)/(6m+p−1), and it is what this returns. It is a bound, not
//     the order's exact value: simulating torch's ZBV order meets it once m >= 2p−1 (its order
//     is built for max(m, 2p−1) micro-batches; pinned by a test), for fewer only sometimes.
double analytic_bubble(const std::string& name, int pp, int virtual_stages, int microbatches) {
  const double p = pp, v = virtual_stages, m = microbatches;
  if (name == "gpipe" || name == "1f1b") return (p - 1) / (m + p - 1);
  if (name == "interleaved-1f1b") return (p - 1) / (v * m + p - 1);
  if (name == "zb-h1") return (p - 1) / (3 * m + p - 1);
  VS_USER_CHECK(name == "zbv", "[pipeline] no bubble formula for schedule '{}'", name);
  return (p - 1) / (6 * m + p - 1);
}

std::string bubble_formula(const std::string& name) {
  if (name == "gpipe" || name == "1f1b") return "(p-1)/(m+p-1)";
  if (name == "interleaved-1f1b") return "(p-1)/(v*m+p-1)";
  if (name == "zb-h1") return "(p-1)/(3m+p-1)";
  if (name == "zbv") return "(p-1)/(6m+p-1) [a lower bound; met from m = 2p-1]";
  return "";
}

std::string timeline(const PipelineSchedule& s, const Simulation& sim) {
  size_t width = 2;
  for (const auto& runs : sim.runs)
    for (const auto& t : runs)
      width = std::max(width, to_string(t.action).size() + 1);
  const int rank_width = static_cast<int>(std::to_string(s.pp - 1).size());
  std::string out;
  for (int r = 0; r < s.pp; ++r) {
    std::vector<std::string> cells(static_cast<size_t>(sim.makespan), ".");
    for (const auto& t : sim.runs[r])
      for (int64_t c = t.start; c < t.end; ++c)
        cells[c] = c == t.start ? to_string(t.action) : "~";
    out += fmt::format("rank {:<{}} |", r, rank_width);
    for (const auto& c : cells)
      out += fmt::format(" {:<{}}", c, width - 1);
    out += fmt::format("  (stages {})\n", stage_list(s.stage_rank, r));
  }
  if (!sim.deadlock_free) {
    out += "deadlock:\n";
    for (const auto& line : sim.stuck)
      out += "  " + line + "\n";
  }
  return out;
}

std::string format_actions(const PipelineSchedule& s) {
  std::string out;
  for (int r = 0; r < s.pp; ++r) {
    std::vector<std::string> items;
    for (const auto& a : s.ranks[r])
      items.push_back(to_string(a));
    out += fmt::format("rank {}: {}\n", r, fmt::join(items, " "));
  }
  return out;
}

}  // namespace vescale::pipeline
