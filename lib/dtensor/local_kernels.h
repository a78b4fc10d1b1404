#pragma once
// The per-rank ATen kernels behind ops that take more than one ATen call. They see local tensors
// only; the DTensor op around them decides placements (dtensor/ops.cpp).

#include <ATen/Tensor.h>

namespace vescale::local {

/// softmax(q k^T / sqrt(D) + causal mask) v for q, k, v of shape [B, H, T, D].
///
/// NOTE [Explicit attention]: the reference path (float64, the CPU, LibTorch 1.13). The mask is
/// an additive [T, T] bias of 0 and -inf, made once per (T, dtype, device) and shared, and the
/// scale is applied by the same pass that adds it: add(bias, scores, alpha = scale). Against the
/// textbook `(q @ k^T) * scale` then `masked_fill(mask, -inf)` this saves two passes over the
/// [B, H, T, T] scores forward and two backward (masked_fill with a broadcast bool mask is the
/// slowest of them on the CPU), and the values are the same bit for bit: x * s + 0 == x * s.
/// The matmuls are bmm over [B*H, T, D] views, so k^T is a stride, not a copy.
at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

/// The same attention by blocks of query rows, skipping the keys above the diagonal, with a
/// hand-written backward (NOTE [Blocked causal attention]). Not bitwise the explicit kernel: the
/// fast path for float32 and bfloat16 off CUDA (ops::causal_attention picks it through
/// use_blocked_attention); sequences shorter than two blocks take the explicit kernel.
///
/// NOTE [Blocked causal attention]: the explicit kernel computes all T x T scores and then masks
/// half of them away; its matmuls and softmax do twice the work causal attention needs. Here the
/// T query rows are cut into blocks of R rows (R = max(32, T / 8 rounded up to 32)); block i
/// (rows [s, e)) only meets keys [0, e):
///   scores_i = baddbmm(bias[s:e, :e], q[s:e], k[:e]^T, alpha = scale)   [N, e - s, e]
///   y[s:e]   = softmax(scores_i) v[:e]
/// so the matmuls and the softmax touch (nb + 1) / (2 nb) of the full work for nb blocks (5/8 at
/// T = 128). Only the blocks' probabilities are saved. The backward goes block by block from the
/// last (which meets every key):
///   ds_i = scale * softmax_backward(dy_i v[:e]^T, p_i);  dq[s:e] = ds_i k[:e]
///   dv[:e] += p_i^T dy_i;  dk[:e] += ds_i^T q[s:e]
/// Every matmul writes a fresh contiguous tensor (LibTorch 1.13's CPU bmm batches those into one
/// BLAS loop; an in-place baddbmm_ into a strided slice dispatches one addmm_ per matrix), and
/// the blocks of y and dq are concatenated. Measured on gpt-tiny at T = 128 (1 process, 1 thread
/// each for ATen and OpenBLAS): 10,789 tokens/s with the explicit kernel, 11,800-12,300 with
/// this one. Each score is the same dot product, but the matmul kernels and the softmax sums run
/// over other lengths, so values differ in the last bits (float32: ~1e-6 of the largest value;
/// local_kernels_test prints them).
at::Tensor blocked_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

/// The additive causal mask [T, T]: 0 on and below the diagonal, -inf above. Cached.
at::Tensor causal_bias(int64_t t, const at::TensorOptions& options);

}  // namespace vescale::local
