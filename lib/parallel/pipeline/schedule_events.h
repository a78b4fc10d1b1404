// The data flow between the actions of a schedule: what executed actions make available, and what
// each action needs first. The one definition of it, shared by add_communication (where receives
// go), simulate (when actions run), the zb-h1 generator (when an action is ready) and, for its
// messages, validate. Internal to parallel/pipeline/.
#pragma once

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "parallel/pipeline/schedule.h"

namespace vescale::pipeline::detail {

/// Per rank, an ordered list of actions.
using Orders = std::vector<std::vector<Action>>;

/// F, B, I and W of (stage, micro).
inline Action fwd(int stage, int micro) {
  return {ActionKind::kForward, stage, micro};
}
inline Action bwd(int stage, int micro) {
  return {ActionKind::kBackward, stage, micro};
}
inline Action bwd_i(int stage, int micro) {
  return {ActionKind::kBackwardInput, stage, micro};
}
inline Action bwd_w(int stage, int micro) {
  return {ActionKind::kBackwardWeight, stage, micro};
}

/// B or I: the action that makes the gradient of its stage's input.
inline bool produces_input_grad(ActionKind kind) {
  return kind == ActionKind::kBackward || kind == ActionKind::kBackwardInput;
}

/// SEND_F or SEND_B.
inline bool is_send(ActionKind k) {
  return k == ActionKind::kSendActivation || k == ActionKind::kSendGrad;
}

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

/// What action `a` makes available once it has run.
std::vector<EventKey> events_of(const Action& a);
/// The events action `a` waits for. Across ranks an input is there when the producer's rank
/// sent it and this rank posted the receive.
std::vector<EventKey> needs_of(const Action& a, const std::vector<int>& stage_rank);
/// An event as the action(s) that make it, for a message naming what a stuck action waits for.
std::string describe(const EventKey& e, const std::vector<int>& stage_rank);
/// The send that carries the output of compute action `a` to another rank, if any.
std::optional<Action> send_after(const Action& a, const std::vector<int>& stage_rank);
/// The receive that matches `send` (on the peer stage).
Action matching_recv(const Action& send);

}  // namespace vescale::pipeline::detail
