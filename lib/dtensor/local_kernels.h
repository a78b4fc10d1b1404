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

/// The additive causal mask [T, T]: 0 on and below the diagonal, -inf above. Cached.
at::Tensor causal_bias(int64_t t, const at::TensorOptions& options);

}  // namespace vescale::local
