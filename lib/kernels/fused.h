// NOTE [Fast paths]
// LibTorch's fused kernels, compiled in by the LibTorch version (NOTE [Version guards]) and
// picked at run time by the kernel table (NOTE [Kernel table]) from the device and dtype:
// - fused scaled-dot-product attention (at::scaled_dot_product_attention, LibTorch 2.0+) for
//   ops::causal_attention's local kernel;
// - fused AdamW (at::_fused_adamw_, LibTorch 2.1+, a CUDA kernel) for AdamW::step;
// - TF32 matmuls (float32 matmul precision "high") for a job computing float32 on CUDA.
// Each is used only on CUDA tensors and never in float64: the explicit kernels stay the float64
// reference that the parity tests hold every layout to, and the only path of LibTorch 1.13 and
// of the CPU. The fused kernels compute the same formulas (attention: causal, scale
// 1/sqrt(head dim), no dropout on the attention probabilities, as the explicit path) but not
// bit for bit. Their LibTorch 2.x calls live in fused.cpp, inside `#if` blocks that the CPU build
// machine (Debian's LibTorch 1.13) never compiles.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "kernels/adamw_update.h"

/// The fused kernels: call them only where the kernel table picks them (a build without one
/// throws).
namespace vescale::fused {

/// softmax(q k^T / sqrt(d) + causal mask) v in one fused kernel. q, k, v: [B, H, T, D].
at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

/// Whether the fused AdamW kernel takes these tensors of one parameter (its value, gradient and
/// two moments): not empty, contiguous, of one dtype and device.
bool adamw_takes(const std::vector<at::Tensor>& tensors);

/// One AdamW update of every tensor of `lists` in place (PyTorch's fused CUDA kernel); each
/// parameter's tensors as adamw_takes requires.
void adamw_step(const AdamWLists& lists, const AdamWHyper& hyper);

}  // namespace vescale::fused
