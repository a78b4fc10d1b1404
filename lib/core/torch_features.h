// Where the fast paths of NOTE [Fast paths] (kernels/fused.h) apply, and the summaries that
// name them.
#pragma once

#include <c10/core/ScalarType.h>

#include <string>

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
/// For --version: "LibTorch 1.13.0 (CPU only); fast paths built in: ..." or, for a CUDA build,
/// "LibTorch 2.6.0 (CUDA 12.4, NCCL 2.22.3; no GPU visible); fast paths built in: ...".
/// `nccl_version` is comm::nccl_version() ("" without NCCL).
std::string build_summary(const std::string& nccl_version);

}  // namespace vescale
