// NOTE [Fast paths]
// Fast LibTorch kernels, picked at compile time (NOTE [Version guards]) and at run time by the
// device and dtype of the tensors (docs/design.md §16):
// - fused scaled-dot-product attention (at::scaled_dot_product_attention, LibTorch 2.0+) for
//   ops::causal_attention's local kernel;
// - fused AdamW (at::_fused_adamw_, LibTorch 2.1+, a CUDA kernel) for AdamW::step;
// - TF32 matmuls (float32 matmul precision "high") for a job computing float32 on CUDA.
// Each is used only on CUDA tensors and never in float64: the explicit kernels stay the float64
// reference that the parity tests hold every layout to, and the only path of LibTorch 1.13 and
// of the CPU. The fused kernels compute the same formulas (attention: causal, scale
// 1/sqrt(head dim), no dropout on the attention probabilities, as the explicit path) but not
// bit for bit. The LibTorch 2.x calls live in torch_features.cpp, inside `#if` blocks that the
// CPU build machine (Debian's LibTorch 1.13) never compiles.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/version_guards.h"

namespace vescale {

constexpr bool kHasFusedAttention = VESCALE_HAS_FUSED_ATTENTION;
constexpr bool kHasFusedAdamW = VESCALE_HAS_FUSED_ADAMW;
constexpr bool kHasTf32Control = VESCALE_HAS_TF32_CONTROL;

/// Whether tensors of `dtype` on `device` take a fast path (this build has it, the device is
/// CUDA, the dtype is not float64).
bool use_fused_attention(Device device, at::ScalarType dtype);
bool use_fused_adamw(Device device, at::ScalarType dtype);
bool use_tf32_matmul(Device device, at::ScalarType dtype);
/// Whether ops::causal_attention takes vescale's own blocked kernel (NOTE [Blocked causal
/// attention], kernels/local_kernels.h): wherever the fused kernel is off, except in float64.
bool use_blocked_attention(Device device, at::ScalarType dtype);

/// Sets float32 matmuls to TF32 ("high") when use_tf32_matmul(device, dtype); process-wide.
/// Returns whether it did.
bool configure_matmul_precision(Device device, at::ScalarType dtype);

/// "fused attention on, blocked attention off (fused attention instead), fused AdamW on, TF32
/// matmuls off (float64 is the reference)" for a job computing `dtype` on `device`.
std::string fast_paths_summary(Device device, at::ScalarType dtype);
/// The CUDA runtime version LibTorch was built with ("12.4"), or "" for a CPU build.
std::string cuda_build_version();
/// For --version: "LibTorch 1.13.0 (CPU only); fast paths built in: ..." or, for a CUDA build,
/// "LibTorch 2.6.0 (CUDA 12.4, NCCL 2.22.3; no GPU visible); fast paths built in: ...".
/// `nccl_version` is comm::nccl_version() ("" without NCCL).
std::string build_summary(const std::string& nccl_version);

/// The fused kernels behind the flags: call them only where the use_* predicate holds (a build
/// without one throws).
namespace fused {

/// softmax(q k^T / sqrt(d) + causal mask) v in one fused kernel. q, k, v: [B, H, T, D].
at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

/// The tensors of one fused AdamW update: equally long lists, each tensor i of one dtype,
/// device, size and layout (contiguous, not empty) across the lists.
struct AdamWLists {
  std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs;
};

struct AdamWHyper {
  double lr, beta1, beta2, eps, weight_decay;
  int64_t step;  ///< the update's number, from 1 (bias correction)
};

/// One AdamW update of every tensor of `lists` in place (PyTorch's fused CUDA kernel).
void adamw_step(const AdamWLists& lists, const AdamWHyper& hyper);

}  // namespace fused
}  // namespace vescale
