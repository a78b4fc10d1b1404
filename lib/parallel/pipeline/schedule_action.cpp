#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>

#include "core/enum_names.h"
#include "core/error.h"
#include "parallel/pipeline/schedule.h"

namespace vescale::pipeline {
namespace {

/// The kinds by the names schedules are written with ("1F0", "2SEND_B3").
const EnumNames<ActionKind>& action_kind_names() {
  static const EnumNames<ActionKind> names("[pipeline] action kind",
                                           {{ActionKind::kForward, "F"},
                                            {ActionKind::kBackward, "B"},
                                            {ActionKind::kBackwardInput, "I"},
                                            {ActionKind::kBackwardWeight, "W"},
                                            {ActionKind::kSendActivation, "SEND_F"},
                                            {ActionKind::kRecvActivation, "RECV_F"},
                                            {ActionKind::kSendGrad, "SEND_B"},
                                            {ActionKind::kRecvGrad, "RECV_B"}});
  return names;
}

}  // namespace

bool is_compute(ActionKind kind) {
  return kind == ActionKind::kForward || kind == ActionKind::kBackward ||
         kind == ActionKind::kBackwardInput || kind == ActionKind::kBackwardWeight;
}

std::string to_string(const Action& a) {
  return fmt::format("{}{}{}", a.stage, action_kind_names().name(a.kind), a.micro);
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
    if (const auto k = action_kind_names().find(kind))
      return {*k, std::stoi(text.substr(0, i)), std::stoi(micro)};
  }
  throw UserError(fmt::format(
      "[pipeline] '{}' is not an action: STAGE KIND MICRO with KIND one of {} (e.g. 1F0, 0I1, "
      "2SEND_B3)",
      text, fmt::join(action_kind_names().names(), ", ")));
}

}  // namespace vescale::pipeline
