// Schedule: how one step's micro-batches run forward and backward on this rank. Gradient
// accumulation (below) is the schedule without a pipeline; pipeline schedules ([7]) implement
// the same interface over stages. A schedule tells the step's gradient owners when its last
// backward starts, so they can overlap their communication with it (NOTE [Grad sync]).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "dtensor/dtensor.h"
#include "train/step_trace.h"
#include "train/task.h"

namespace vescale {

/// Micro-batch `micro` of the step (this rank's rows).
using MicroBatches = std::function<Batch(int64_t micro)>;

class Schedule {
 public:
  virtual ~Schedule() = default;
  /// Runs the forward and backward of every micro-batch of one step. The parameters' gradients
  /// accumulate the gradient of the mean of the micro-batch losses. Returns the micro-batch
  /// losses, in micro-batch order: float64 [microbatches] on the device, not read on the host
  /// (NOTE [One host sync]); 0 for those this rank does not compute (other pipeline stages).
  virtual at::Tensor run(const MicroBatches& batches) = 0;
  /// Micro-batches per step.
  virtual int64_t microbatches() const = 0;

  /// `listener` runs once per step, after this rank's last forward and just before its last
  /// backward starts.
  void on_last_backward(std::function<void()> listener);

  /// Where the last run()'s time went on this rank: its forwards and its backwards (the
  /// collectives inside them included), and, under a pipeline, the time idle waiting for other
  /// stages' activations and gradients (not in the other two).
  struct Times {
    double forward_s = 0, backward_s = 0, idle_s = 0;
  };
  const Times& times() const { return times_; }

  /// Marks the phases of run() in `trace` (NOTE [Profile trace]); null: not marked.
  void set_trace(StepTrace* trace) { trace_ = trace; }

 protected:
  void notify_last_backward() const;
  Times times_;
  StepTrace* trace_ = nullptr;

 private:
  std::vector<std::function<void()>> listeners_;
};

/// No pipeline: micro-batch after micro-batch, each forward then backward, gradients
/// accumulating (each loss scaled by 1/microbatches).
class GradientAccumulation : public Schedule {
 public:
  /// `forward_loss`: the mean loss of a micro-batch (a Replicate scalar), e.g. the task's.
  using ForwardLoss = std::function<DTensor(const Batch&)>;
  GradientAccumulation(int64_t microbatches, ForwardLoss forward_loss);
  at::Tensor run(const MicroBatches& batches) override;
  int64_t microbatches() const override { return microbatches_; }

 private:
  int64_t microbatches_;
  ForwardLoss forward_loss_;
};

}  // namespace vescale
