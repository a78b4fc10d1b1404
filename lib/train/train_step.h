// One training step in four parts: schedule (forward/backward of every micro-batch) -> grad sync
// -> clip -> optimizer step; then the step's loss, the global-batch mean.

#pragma once

#include <functional>
#include <vector>

#include "mesh/job_mesh.h"
#include "optim/optimizer.h"
#include "parallel/grad_clip.h"
#include "parallel/grad_sync.h"
#include "train/schedule.h"
#include "train/step_anatomy.h"

namespace vescale {

/// A parameter as the step sees it: the job-mesh dims over which its gradient's pieces are
/// disjoint (dp too under ZeRO: each dp rank clips its rows), and whether this rank counts it in
/// the gradient norm (a copy of a weight tied across pipeline stages is counted by its owner only).
struct StepParam {
  DTensor* param;
  std::vector<int> split_dims;
  bool in_norm = true;
};

struct StepResult {
  double loss = 0;       ///< mean over micro-batches and dp ranks: the global batch's mean loss
  double grad_norm = 0;  ///< before clipping
  StepAnatomy time;
  /// False when the loss or gradient norm was not finite: the optimizer did not step
  /// (NOTE [Non-finite steps]).
  bool updated = true;
};

class TrainStep {
 public:
  /// `params` are the parameters `grad_sync` and `optimizer` cover, on the param mesh of `mesh`,
  /// in grad sync's order; `norm_dims` the job-mesh dims any gradient may be split over (every
  /// rank the same). `take_grads` (may be empty) runs after grad sync, before clipping (the
  /// master weights take their float32 gradients); the step clips and steps the gradients of the
  /// optimizer's views, one per parameter. `after_update` (may be empty) runs after each
  /// optimizer step (master weights into parameters, ZeRO's all-gather).
  /// Registers grad sync as a listener of the schedule's last backward.
  TrainStep(const JobMesh& mesh, std::vector<StepParam> params, std::vector<int> norm_dims,
            Schedule& schedule, GradSync& grad_sync, Optimizer& optimizer, double max_grad_norm,
            std::function<void()> take_grads = nullptr,
            std::function<void()> after_update = nullptr);

  /// One step at learning rate `lr` over the step's micro-batches: one host sync, for the
  /// loss and the gradient norm together (NOTE [One host sync]). *Collective* over the job mesh.
  StepResult run(const MicroBatches& batches, double lr);

  /// Marks the step's phases in `trace`, the schedule's too (NOTE [Profile trace]).
  void set_trace(StepTrace* trace);

 private:
  /// The gradient the optimizer steps of each parameter (its rows under ZeRO, float32 under
  /// master weights) with the job-mesh dims that split it.
  std::vector<GradPiece> grad_pieces() const;
  /// The global batch's mean loss from this rank's micro-batch losses, on the device ([1]).
  /// *Collective*.
  at::Tensor mean_loss(const at::Tensor& losses) const;

  const JobMesh& mesh_;
  std::vector<StepParam> params_;
  std::vector<int> norm_dims_;
  Schedule& schedule_;
  GradSync& grad_sync_;
  Optimizer& optimizer_;
  double max_grad_norm_;
  std::function<void()> take_grads_;
  std::function<void()> after_update_;
  StepTrace* trace_ = nullptr;
};

}  // namespace vescale
