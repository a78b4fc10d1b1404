#include "train/train_step.h"

#include <ATen/ATen.h>

#include <cmath>

#include "core/clock.h"
#include "core/error.h"
#include "core/host_sync.h"

namespace vescale {

TrainStep::TrainStep(const JobMesh& mesh, std::vector<StepParam> params, std::vector<int> norm_dims,
                     Schedule& schedule, GradSync& grad_sync, Optimizer& optimizer,
                     double max_grad_norm, std::function<void()> take_grads,
                     std::function<void()> after_update)
    : mesh_(mesh),
      params_(std::move(params)),
      norm_dims_(std::move(norm_dims)),
      schedule_(schedule),
      grad_sync_(grad_sync),
      optimizer_(optimizer),
      max_grad_norm_(max_grad_norm),
      take_grads_(std::move(take_grads)),
      after_update_(std::move(after_update)) {
  VS_CHECK(optimizer_.views().size() == params_.size(),
           "[train] the optimizer has {} views for {} parameters", optimizer_.views().size(),
           params_.size());
  schedule_.on_last_backward([this] { grad_sync_.start_last_backward(); });
}

std::vector<GradPiece> TrainStep::grad_pieces() const {
  std::vector<GradPiece> pieces;
  for (size_t k = 0; k < params_.size(); ++k)
    pieces.push_back({optimizer_.views()[k].grad(), params_[k].split_dims, params_[k].in_norm});
  return pieces;
}

void TrainStep::set_trace(StepTrace* trace) {
  trace_ = trace;
  schedule_.set_trace(trace);
}

StepResult TrainStep::run(const MicroBatches& batches, double lr) {
  StepResult result;
  {
    const StepPhase phase(trace_, "zero grad");
    grad_sync_.zero_grad();
  }
  const at::Tensor losses = schedule_.run(batches);
  auto start = Clock::now();
  {
    const StepPhase phase(trace_, "grad sync");
    grad_sync_.finish();
  }
  result.time.grad_sync_s = seconds_since(start);
  start = Clock::now();
  const StepPhase phase(trace_, "optimizer");
  if (take_grads_) take_grads_();
  const at::Tensor norm = clip_grad_norm(grad_pieces(), mesh_.mesh(), norm_dims_, max_grad_norm_);
  // NOTE [One host sync]
  // A step reads its device once: the loss and the gradient norm, together, after the clipping
  // was queued (its factor is computed on the device). The micro-batch losses stay on the device
  // through the schedule; the optimizer takes its learning rate and step from the host. Counted
  // by host_syncs(); metrics_test checks one per step.
  const std::vector<double> host = host_values(at::cat({mean_loss(losses), norm.reshape({1})}));
  result.loss = host[0];
  result.grad_norm = host[1];
  // NOTE [Non-finite steps]: every rank has the same loss and norm, so all drop the update.
  result.updated = std::isfinite(result.loss) && std::isfinite(result.grad_norm);
  if (result.updated) optimizer_.step(lr);
  if (after_update_) after_update_();
  result.time.optimizer_s = seconds_since(start);
  const Schedule::Times& t = schedule_.times();
  result.time.forward_s = t.forward_s;
  result.time.backward_s = t.backward_s;
  result.time.bubble_s = t.idle_s;
  return result;
}

at::Tensor TrainStep::mean_loss(const at::Tensor& losses) const {
  at::Tensor loss = (losses.sum() / static_cast<double>(schedule_.microbatches())).reshape({1});
  // Over the data dims, dp x cp: a cp rank's loss is the mean of its part of the tokens, as many
  // as the others'.
  mesh_.data_group().all_reduce(loss, comm::ReduceOp::kAvg);
  // Under a pipeline only the last stage's rank has losses: the others add 0.
  if (mesh_.pp() > 1) mesh_.group("pp").all_reduce(loss, comm::ReduceOp::kSum);
  return loss;
}

}  // namespace vescale
