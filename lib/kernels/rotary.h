// Rotary embedding by our CUDA kernel (NOTE [CUDA kernels]) as one autograd node; the explicit
// path is local::rotary (kernels/local_kernels.h). The kernel table picks (kRotaryPaths).
#pragma once

#include <ATen/core/Tensor.h>

namespace vescale {

/// local::rotary's result by cuda_kernels::rotary, with the same frequencies
/// (local::rotary_inv_freq); its backward is the rotation back, by the same kernel.
at::Tensor cuda_rotary(const at::Tensor& x, double theta, const at::Tensor& positions);

}  // namespace vescale
