#include "train/nonfinite.h"

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include <cmath>

#include "core/error.h"
#include "core/logging.h"

namespace vescale {

namespace {

/// NaN without the sign bit's "-nan".
std::string number(double x) {
  return std::isnan(x) ? "nan" : fmt::format("{}", x);
}

}  // namespace

NonFiniteGuard::NonFiniteGuard(OnNonfinite policy, int64_t max_skipped)
    : policy_(policy), max_skipped_(max_skipped) {}

void NonFiniteGuard::after_step(int64_t step, const StepResult& result) {
  if (result.updated) {
    in_a_row_ = 0;
    return;
  }
  ++skipped_;
  ++in_a_row_;
  const std::string what = fmt::format("step {}: the loss is {} and the gradient norm {}", step + 1,
                                       number(result.loss), number(result.grad_norm));
  if (policy_ == OnNonfinite::kStop) {
    throw DivergedError(fmt::format(
        "{}; stopped without saving or updating (training.on_nonfinite = \"stop\"; \"skip\" "
        "drops such steps). Lower optimizer.lr, or resume from the last checkpoint",
        what));
  }
  if (in_a_row_ >= max_skipped_) {
    throw DivergedError(fmt::format(
        "{}; {} steps in a row were not finite (training.max_skipped = {}); stopped without "
        "saving. Lower optimizer.lr, or resume from the last checkpoint",
        what, in_a_row_, max_skipped_));
  }
  if (log_rank() != 0) return;
  spdlog::warn(
      "{}; the update is skipped ({} in a row, {} in all; training.on_nonfinite = "
      "\"skip\")",
      what, in_a_row_, skipped_);
}

bool finite_everywhere(const std::vector<at::Tensor>& tensors, const comm::Group& world) {
  // One flag per tensor, reduced where the tensors live: one host sync in all, not one each.
  std::vector<at::Tensor> nonfinite{at::zeros({}, at::dtype(at::kBool).device(world.device()))};
  for (const at::Tensor& t : tensors) {
    if (!t.defined() || t.numel() == 0 || !t.is_floating_point()) continue;
    nonfinite.push_back(at::isfinite(t).all().logical_not().to(world.device()));
  }
  at::Tensor flag = at::stack(nonfinite).any().to(at::kFloat).reshape({1});
  world.all_reduce(flag, comm::ReduceOp::kMax);
  return flag.item<float>() == 0.0f;
}

}  // namespace vescale
