#include "train/train_step.h"

#include <ATen/ATen.h>

namespace vescale {

TrainStep::TrainStep(const JobMesh& mesh, std::vector<DTensor*> params, Schedule& schedule,
                     GradSync& grad_sync, Optimizer& optimizer, double max_grad_norm)
    : mesh_(mesh),
      params_(std::move(params)),
      norm_dims_(mesh.param_mesh_dims()),
      schedule_(schedule),
      grad_sync_(grad_sync),
      optimizer_(optimizer),
      max_grad_norm_(max_grad_norm) {
  for (DTensor* p : params_)
    split_dims_.push_back(p->spec().on_mesh(mesh.mesh()).split_dims());
  schedule_.on_last_backward([this] { grad_sync_.start_last_backward(); });
}

std::vector<GradPiece> TrainStep::grad_pieces() const {
  std::vector<GradPiece> pieces;
  for (size_t k = 0; k < params_.size(); ++k)
    pieces.push_back({params_[k]->to_local().grad(), split_dims_[k]});
  return pieces;
}

StepResult TrainStep::run(const MicroBatchLoss& forward, double lr) {
  StepResult result;
  grad_sync_.zero_grad();
  const std::vector<double> losses = schedule_.run(forward);
  grad_sync_.finish();
  result.grad_norm = clip_grad_norm(grad_pieces(), mesh_.mesh(), norm_dims_, max_grad_norm_);
  optimizer_.step(lr);
  double sum = 0;
  for (double l : losses)
    sum += l;
  at::Tensor loss = at::full({1}, sum / static_cast<double>(schedule_.microbatches()),
                             at::TensorOptions(at::kDouble).device(mesh_.mesh().device()));
  mesh_.group("dp").all_reduce(loss, comm::ReduceOp::kAvg);
  result.loss = loss.item<double>();
  return result;
}

}  // namespace vescale
