// A chunk of the LM loss in one kernel (NOTE [CUDA kernels], NOTE [Fused LM loss]): a block a
// row reads the row's logits once for its max and sum of exponentials together (online softmax:
// the sum rescaled whenever the max grows), takes the target's logit, and then writes the row's
// gradient (softmax - onehot) / N in the logits' own type. ATen's path widens bf16 logits to a
// float32 [rows, vocab] copy, and its log-softmax, the zeros its backward takes and the backward
// are each a kernel over [rows, vocab]; here the only [rows, vocab] tensor written is the
// gradient, in bf16 for bf16 logits.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda_kernels.h"

namespace vescale::cuda_kernels {
namespace {

/// A running softmax denominator: the max seen and the sum of exp(x - max).
struct MaxSum {
  float max;
  float sum;
};

__device__ __forceinline__ MaxSum merge_max_sum(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.max, b.max);
  if (m == -INFINITY) return {m, a.sum + b.sum};  // 0, or a NaN that must stay one
  return {m, a.sum * expf(a.max - m) + b.sum * expf(b.max - m)};
}

/// The block's (max, sum), in every thread.
__device__ MaxSum block_max_sum(MaxSum v) {
  __shared__ MaxSum warps[kThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) {
    const MaxSum other{__shfl_xor_sync(0xffffffffu, v.max, offset),
                       __shfl_xor_sync(0xffffffffu, v.sum, offset)};
    v = merge_max_sum(v, other);
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warps[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kThreads / 32 ? warps[lane] : MaxSum{-INFINITY, 0.0f};
    for (int offset = 16; offset > 0; offset /= 2) {
      const MaxSum other{__shfl_xor_sync(0xffffffffu, v.max, offset),
                         __shfl_xor_sync(0xffffffffu, v.sum, offset)};
      v = merge_max_sum(v, other);
    }
    if (lane == 0) warps[0] = v;
  }
  __syncthreads();
  return warps[0];
}

/// Block r: row r's loss log(sum exp(z - max)) - (z_t - max) into row_loss[r] and, with
/// `grad`, its gradient (exp(z - max) / sum - [j == t]) * inv_n. A target outside [0, columns)
/// adds no logit and no -1 (as the pass-by-pass row treats a target another rank holds).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    lm_loss_kernel(const T* __restrict__ logits, const int64_t* __restrict__ targets,
                   float* __restrict__ row_loss, T* __restrict__ grad, int64_t columns,
                   float inv_n) {
  const int64_t row = blockIdx.x;
  const T* z = logits + row * columns;
  MaxSum v{-INFINITY, 0.0f};
  for (int64_t j = threadIdx.x; j < columns; j += kThreads) {
    const float x = static_cast<float>(z[j]);
    if (x > v.max) {
      v.sum = v.sum * expf(v.max - x) + 1.0f;
      v.max = x;
    } else if (x != -INFINITY) {  // exp(-inf - max) is 0; -inf - -inf would be NaN
      v.sum += expf(x - v.max);
    }
  }
  const MaxSum all = block_max_sum(v);
  const int64_t t = targets[row];
  const bool mine = 0 <= t && t < columns;
  if (threadIdx.x == 0) {
    const float target = mine ? static_cast<float>(z[t]) - all.max : 0.0f;
    row_loss[row] = logf(all.sum) - target;
  }
  if (grad == nullptr) return;
  T* g = grad + row * columns;
  const float inv_sum = 1.0f / all.sum;
  for (int64_t j = threadIdx.x; j < columns; j += kThreads) {
    float p = expf(static_cast<float>(z[j]) - all.max) * inv_sum;
    if (mine && j == t) p -= 1.0f;
    g[j] = static_cast<T>(p * inv_n);
  }
}

}  // namespace

std::pair<at::Tensor, at::Tensor> lm_loss(const at::Tensor& logits_in, const at::Tensor& targets_in,
                                          double n_global, bool grad) {
  TORCH_CHECK(logits_in.is_cuda() && logits_in.dim() == 2,
              "[kernels] lm_loss: logits must be a CUDA tensor [rows, columns]");
  const at::ScalarType dtype = logits_in.scalar_type();
  TORCH_CHECK(takes(dtype), "[kernels] lm_loss: float32, bfloat16 or float16 logits, not ",
              c10::toString(dtype));
  const int64_t rows = logits_in.size(0), columns = logits_in.size(1);
  TORCH_CHECK(targets_in.numel() == rows, "[kernels] lm_loss: ", rows, " targets expected, not ",
              targets_in.numel());
  TORCH_CHECK(rows <= INT32_MAX, "[kernels] lm_loss: at most 2^31 - 1 rows a chunk");
  const c10::cuda::CUDAGuard guard(logits_in.device());
  const at::Tensor logits = logits_in.contiguous();
  const at::Tensor targets = targets_in.to(logits.device(), at::kLong).contiguous();
  at::Tensor row_loss = at::empty({rows}, logits.options().dtype(at::kFloat));
  at::Tensor gradient = grad ? at::empty_like(logits) : at::Tensor();
  if (rows == 0) return {row_loss.sum(), gradient};
  by_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    lm_loss_kernel<T>
        <<<static_cast<unsigned>(rows), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
            logits.data_ptr<T>(), targets.data_ptr<int64_t>(), row_loss.data_ptr<float>(),
            grad ? gradient.data_ptr<T>() : nullptr, columns, static_cast<float>(1.0 / n_global));
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {row_loss.sum(), gradient};
}

}  // namespace vescale::cuda_kernels
