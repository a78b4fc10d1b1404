#include "core/torch_features.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

namespace vescale {
namespace {

/// Why a fast path is off for `dtype` on `device`, or "" when it is on.
std::string why_off(bool built_in, const char* needs, Device device, at::ScalarType dtype) {
  if (!built_in) return fmt::format("needs {}", needs);
  if (!device.is_cuda()) return "CUDA only";
  if (dtype == at::kDouble) return "float64 is the reference";
  return "";
}

std::string state(const char* name, const std::string& why) {
  return why.empty() ? fmt::format("{} on", name) : fmt::format("{} off ({})", name, why);
}

bool fast(bool built_in, Device device, at::ScalarType dtype) {
  return why_off(built_in, "", device, dtype).empty();
}

}  // namespace

bool use_fused_attention(Device device, at::ScalarType dtype) {
  return fast(kHasFusedAttention, device, dtype);
}

bool use_fused_adamw(Device device, at::ScalarType dtype) {
  return fast(kHasFusedAdamW, device, dtype);
}

bool use_tf32_matmul(Device device, at::ScalarType dtype) {
  // TF32 rounds float32 operands only; half and bfloat16 matmuls are unaffected by it.
  return fast(kHasTf32Control, device, dtype) && dtype == at::kFloat;
}

bool use_blocked_attention(Device device, at::ScalarType dtype) {
  return !use_fused_attention(device, dtype) && dtype != at::kDouble;
}

bool configure_matmul_precision(Device device, at::ScalarType dtype) {
  if (!use_tf32_matmul(device, dtype)) return false;
#if VESCALE_HAS_TF32_CONTROL
  at::globalContext().setFloat32MatmulPrecision("high");
#endif
  return true;
}

std::string fast_paths_summary(Device device, at::ScalarType dtype) {
  std::string tf32 = why_off(kHasTf32Control, "LibTorch 1.12", device, dtype);
  if (tf32.empty() && dtype != at::kFloat) tf32 = "float32 only";
  std::string blocked;
  if (use_fused_attention(device, dtype)) blocked = "fused attention instead";
  if (dtype == at::kDouble) blocked = "float64 is the reference";
  return fmt::format(
      "{}, {}, {}, {}",
      state("fused attention", why_off(kHasFusedAttention, "LibTorch 2.0", device, dtype)),
      state("blocked attention", blocked),
      state("fused AdamW", why_off(kHasFusedAdamW, "LibTorch 2.1", device, dtype)),
      state("TF32 matmuls", tf32));
}

std::string build_summary(const std::string& nccl_version) {
  std::vector<std::string> built;
  if (kHasFusedAttention) built.emplace_back("fused attention");
  if (kHasFusedAdamW) built.emplace_back("fused AdamW");
  if (kHasTf32Control) built.emplace_back("TF32 matmuls");
  std::string backend = "CPU only";
  if (const std::string cuda = cuda_build_version(); !cuda.empty()) {
    const int gpus = cuda_device_count();
    backend = fmt::format("CUDA {}, {}; {}", cuda,
                          nccl_version.empty() ? "no NCCL" : "NCCL " + nccl_version,
                          gpus == 0 ? "no GPU visible" : fmt::format("{} GPU(s) visible", gpus));
  }
  return fmt::format(
      "LibTorch {} ({}); fast paths built in: {} (used on CUDA, never in float64)", TORCH_VERSION,
      backend, built.empty() ? std::string("none") : fmt::format("{}", fmt::join(built, ", ")));
}

}  // namespace vescale
