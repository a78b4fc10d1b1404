#include "parallel/pipeline/schedule_events.h"

#include <fmt/format.h>

namespace vescale::pipeline::detail {

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

std::optional<Action> send_after(const Action& a, const std::vector<int>& stage_rank) {
  const int last = static_cast<int>(stage_rank.size()) - 1;
  if (a.kind == ActionKind::kForward && a.stage < last &&
      stage_rank[a.stage + 1] != stage_rank[a.stage])
    return Action{ActionKind::kSendActivation, a.stage, a.micro};
  if (produces_input_grad(a.kind) && a.stage > 0 && stage_rank[a.stage - 1] != stage_rank[a.stage])
    return Action{ActionKind::kSendGrad, a.stage, a.micro};
  return std::nullopt;
}

Action matching_recv(const Action& send) {
  if (send.kind == ActionKind::kSendActivation)
    return {ActionKind::kRecvActivation, send.stage + 1, send.micro};
  return {ActionKind::kRecvGrad, send.stage - 1, send.micro};
}

}  // namespace vescale::pipeline::detail
