// The AdamW update of lists of alike tensors: the explicit one here, the fused one in
// kernels/fused.h. optim/adamw.cpp groups the tensors and the kernel table (NOTE [Kernel table])
// picks which of the two updates a group.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace vescale {

/// The tensors of one AdamW update: equally long lists, each tensor i of one dtype, device and
/// size across the lists.
struct AdamWLists {
  std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs;
  /// Optional: a flat buffer of the params' dtype and device for the explicit update's
  /// temporaries, which then allocates nothing and works through the tensors a scratch-long
  /// chunk at a time (all of a chunk's passes while it is in cache).
  at::Tensor scratch;
};

struct AdamWHyper {
  double lr, beta1, beta2, eps, weight_decay;
  int64_t step;  ///< the update's number, from 1 (bias correction)
};

namespace local {

/// One AdamW update of every tensor of `lists` in place, op by op: the reference (float64), and
/// the path on the CPU and LibTorch 1.13. Per element it is exactly
///   p *= 1 - lr wd;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
///   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
/// so the values do not depend on how tensors are grouped, merged or chunked. Contiguous
/// tensors go a scratch-long chunk at a time when `lists.scratch` is given.
void adamw_step(const AdamWLists& lists, const AdamWHyper& hyper);

}  // namespace local
}  // namespace vescale
