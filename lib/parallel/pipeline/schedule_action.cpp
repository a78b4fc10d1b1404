#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "core/error.h"
#include "parallel/pipeline/schedule.h"

namespace vescale::pipeline {
namespace {

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

}  // namespace vescale::pipeline
