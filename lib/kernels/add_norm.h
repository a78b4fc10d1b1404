// The residual add and the norm after it, x + delta and norm(x + delta), as one op: a
// transformer block's second norm reads the sum its first residual add writes, so a kernel that
// does both reads x and delta once and writes the sum and the normed rows in the same pass
// (ATen: an add, then the norm's statistics and its output, each a pass over [tokens, C]). The
// kernel table picks the path (kAddNormPaths): ATen's add and norm (the explicit row, any device
// and dtype), or our CUDA kernel (NOTE [CUDA kernels]) as one autograd node.
#pragma once

#include <ATen/core/Tensor.h>

#include <utility>

namespace vescale {

/// Which norm follows the add: LayerNorm (weight and bias) or RMSNorm (weight; Hugging Face's
/// LlamaRMSNorm, local::rms_norm).
enum class NormKind { kLayerNorm, kRmsNorm };

namespace local {

/// (x + delta, norm(x + delta)) by at::add then at::layer_norm or local::rms_norm over the last
/// dim: the very calls ops::add and ops::layer_norm (ops::rms_norm) make, so the result is theirs
/// bit for bit. `b` is undefined for RMSNorm.
std::pair<at::Tensor, at::Tensor> add_norm(NormKind kind, const at::Tensor& x,
                                           const at::Tensor& delta, const at::Tensor& w,
                                           const at::Tensor& b, double eps);

}  // namespace local

/// The same by cuda_kernels::add_norm_forward, whose backward is cuda_kernels::add_norm_backward:
/// the node saves the sum, the weight and each row's mean and 1/std (float32), as ATen's norm
/// saves its input and statistics.
std::pair<at::Tensor, at::Tensor> cuda_add_norm(NormKind kind, const at::Tensor& x,
                                                const at::Tensor& delta, const at::Tensor& w,
                                                const at::Tensor& b, double eps);

}  // namespace vescale
