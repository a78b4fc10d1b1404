#pragma once
// The per-rank ATen kernels behind ops that take more than one ATen call. They see local tensors
// only; the DTensor op around them decides placements (dtensor/ops.cpp), and the kernel table
// which of them runs (NOTE [Kernel table]).

#include <ATen/Tensor.h>

namespace vescale::local {

/// x w^T + b for x [..., in], w [out, in], b [out] (or undefined), by at::linear: the linear
/// path on CUDA, where it keeps its fused bias epilogue (NOTE [Kernel table]).
at::Tensor aten_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b);

/// The same as a plain mm and an in-place add of the bias: the linear path off CUDA.
///
/// NOTE [Linear bias on the CPU]: at::linear folds a 2-D input and a bias into one addmm, which
/// on the CPU first copies the bias broadcast to the whole [N, out] output and then lets the
/// GEMM add into it. That copy from a stride-0 tensor costs about twice an in-place add of the
/// bias after a plain mm (gpt-tiny at T = 128, 20 steps, one thread: 119 ms of copies against
/// 56 ms of adds). So off CUDA the product is an mm and the bias an add_ (without a bias, or for
/// a 1-D x, at::linear); on CUDA the kernel table picks aten_linear.
at::Tensor linear_mm_add(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b);

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

/// Attention of t new queries q [B, H, t, D] to `past` cached positions and themselves: k, v
/// [B, H, past + t, D], query i seeing keys [0, past + i]. With past = 0, causal_attention.
at::Tensor cached_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            int64_t past);

/// The same attention by blocks of query rows, skipping the keys above the diagonal, with a
/// hand-written backward (NOTE [Blocked causal attention]). Not bitwise the explicit kernel: the
/// fast path for float32 and bfloat16 off CUDA (the kernel table's attention path after the
/// fused one); sequences shorter than two blocks take the explicit kernel.
///
/// NOTE [Blocked causal attention]: the explicit kernel computes all T x T scores and then masks
/// half of them away; its matmuls and softmax do twice the work causal attention needs. Here the
/// T query rows are cut into blocks of R rows (R = max(32, T / 8 rounded up to 32)); block i
/// (rows [s, e)) only meets keys [0, e):
///   scores_i = scale * q[s:e] k[:e]^T, plus the mask on its diagonal part [s:e, s:e]
///   y[s:e]   = softmax(scores_i) v[:e]                                   scores_i: [N, e - s, e]
/// so the matmuls and the softmax touch (nb + 1) / (2 nb) of the full work for nb blocks (5/8 at
/// T = 128). Only the blocks' probabilities are saved. The backward goes block by block from the
/// last (which meets every key):
///   ds_i = softmax_backward(dy_i v[:e]^T, p_i);  dq[s:e] = scale * ds_i k[:e]
///   dv[:e] += p_i^T dy_i;  dk[:e] += scale * ds_i^T q[s:e]
/// Every matmul is blas::matmul_into (NOTE [Direct BLAS matmul]) with the scale as its alpha,
/// straight on the [B, H, T, D] head views of the projections' [B, T, H, D] memory; y, dq, dk
/// and dv are written in that memory too, block by block (dk and dv accumulate with beta = 1), so
/// the model's reshapes to and from heads are views, not copies. Measured on gpt-tiny at
/// T = 128, 1 process, one thread each for ATen and OpenBLAS, median of 5 alternating runs:
/// 10,789 tokens/s with the explicit kernel, ~11,900 blocked over at::bmm, 12,422 blocked over
/// direct BLAS calls, 12,551 with no head copies (the last two in one A/B: 12,340 and 12,551). Each
/// score is the same dot product, but the matmul kernels and the softmax sums run over other
/// lengths, so values differ in the last bits (float32: ~1e-6 of the largest value;
/// local_kernels_test prints them).
at::Tensor blocked_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

/// x / sqrt(mean(x^2, last dim) + eps) * w, normalised in float32 when x is of lower precision and
/// cast back before the weight (Hugging Face's LlamaRMSNorm).
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps);

/// Rotary embedding of x [B, H, T, D] (rotate-half): x cos + rotate_half(x) sin at `positions`
/// ([T] integers) along dim 2, with frequencies theta^(-2i/D); angles in float64 for float64 x,
/// else float32, and cos and sin cast to x's type (as Hugging Face does).
at::Tensor rotary(const at::Tensor& x, double theta, const at::Tensor& positions);
/// Rotary's frequencies 1 / theta^(2i / D), i < D / 2, in `options` (float32, or float64 for
/// float64 x), as Hugging Face computes them: on the host, then moved to the options' device.
/// Cached; never write into it.
at::Tensor rotary_inv_freq(int64_t d, double theta, const at::TensorOptions& options);

/// The additive causal mask [T, T]: 0 on and below the diagonal, -inf above. Cached.
at::Tensor causal_bias(int64_t t, const at::TensorOptions& options);

}  // namespace vescale::local
