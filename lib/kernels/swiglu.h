// SwiGLU's product silu(gate) * up: ATen's ops (the explicit row, any device and dtype) or our
// CUDA kernel (NOTE [CUDA kernels]) as one autograd node. The kernel table picks (kSwigluPaths).
#pragma once

#include <ATen/core/Tensor.h>

namespace vescale {
namespace local {

/// at::silu(gate) * up: the reference, and the path off CUDA and in float64.
at::Tensor swiglu(const at::Tensor& gate, const at::Tensor& up);

}  // namespace local

/// The same by cuda_kernels::swiglu_forward, whose backward is cuda_kernels::swiglu_backward:
/// the node saves gate and up, as ATen's ops save them (no more memory).
at::Tensor cuda_swiglu(const at::Tensor& gate, const at::Tensor& up);

}  // namespace vescale
