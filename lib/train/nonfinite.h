// What happens when training's numbers stop being numbers.
//
// NOTE [Non-finite steps]: a step whose loss or gradient norm is NaN or inf never updates the
// state: TrainStep checks both before the optimizer step (both are already agreed by every rank:
// the loss is reduced over dp and pp and replicated over tp, and the norm is reduced over every
// dim that splits a gradient), and drops the update. Then `training.on_nonfinite` decides:
// "stop" (the default) ends the job with DivergedError (exit code 3) naming the step, without
// saving; "skip" counts the step and goes on, and stops after `training.max_skipped` skipped
// steps in a row. Independently, a checkpoint is never written from a state that holds a NaN or
// inf (an update with finite gradients can still overflow a parameter): JobCheckpointer::save
// checks every tensor it would write, on every rank, first.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "comm/group.h"
#include "config/config_enums.h"
#include "train/train_step.h"

namespace vescale {

/// Applies `training.on_nonfinite` to each step's result. Not collective: every rank sees the
/// same results and so decides the same.
class NonFiniteGuard {
 public:
  NonFiniteGuard(OnNonfinite policy, int64_t max_skipped);

  /// Called after step `step` (0-based) ran. Throws DivergedError when the job must stop.
  void after_step(int64_t step, const StepResult& result);

  int64_t skipped() const { return skipped_; }

 private:
  OnNonfinite policy_;
  int64_t max_skipped_;
  int64_t skipped_ = 0;
  int64_t in_a_row_ = 0;
};

/// Whether every tensor of every rank of `world` is finite. *Collective* over `world`.
bool finite_everywhere(const std::vector<at::Tensor>& tensors, const comm::Group& world);

}  // namespace vescale
