#include "train/evaluator.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>

namespace vescale {

double evaluate(Task& task, const JobMesh& mesh, int64_t limit) {
  torch::autograd::AutoGradMode no_grad(false);
  double sum = 0, count = 0;
  const int64_t batches = task.val_batches(limit);
  for (int64_t w = mesh.dp_rank(); w < batches; w += mesh.dp()) {
    sum += task.forward_loss(task.val_batch(w), mesh.param_mesh()).to_local().item<double>();
    count += 1;
  }
  at::Tensor totals =
      at::tensor({sum, count}, at::TensorOptions(at::kDouble).device(mesh.mesh().device()));
  mesh.group("dp").all_reduce(totals, comm::ReduceOp::kSum);
  return totals[0].item<double>() / std::max(1.0, totals[1].item<double>());
}

}  // namespace vescale
