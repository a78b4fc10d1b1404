#include "train/evaluator.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>

namespace vescale {

double evaluate(ParallelModel& model) {
  torch::autograd::AutoGradMode no_grad(false);
  const JobMesh& mesh = model.mesh();
  double sum = 0, count = 0;
  const int64_t batches = model.task().val_batches(model.config().eval_windows);
  // Under ZeRO-3 a forward all-gathers over dp, under expert parallelism it sends tokens over
  // ep: every dp rank runs as many, a rank past the last window repeating one without counting
  // it.
  const bool lockstep = model.forward_collective_over_dp();
  for (int64_t first = 0; first < batches; first += mesh.batch_shards()) {
    const int64_t w = first + mesh.batch_rank();
    if (w < batches) {
      sum += model.forward_loss(model.val_batch(w));
      count += 1;
    } else if (lockstep) {
      model.forward_loss(model.val_batch(first));
    }
  }
  at::Tensor totals =
      at::tensor({sum, count}, at::TensorOptions(at::kDouble).device(mesh.mesh().device()));
  // Summed over the data dims: the cp ranks of a dp rank run the same windows, each its part of
  // the tokens, so their means average to the windows' (every part has as many tokens).
  mesh.data_group().all_reduce(totals, comm::ReduceOp::kSum);
  // Under a pipeline only the last stage's rank has the losses: the others add 0.
  if (mesh.pp() > 1) {
    at::Tensor losses = totals.narrow(0, 0, 1).clone();
    mesh.group("pp").all_reduce(losses, comm::ReduceOp::kSum);
    totals[0] = losses[0];
  }
  const at::Tensor host = totals.cpu();
  return host[0].item<double>() / std::max(1.0, host[1].item<double>());
}

}  // namespace vescale
