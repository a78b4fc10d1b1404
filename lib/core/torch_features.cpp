// NOTE [Fast paths]: the one place that calls LibTorch 2.x kernels. The `#if` blocks below are
// NOT COMPILED on this project's build machine (Debian's CPU LibTorch 1.13): they are written
// against the official LibTorch 2.x signatures (native_functions.yaml):
//   scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask=None,
//       float dropout_p=0.0, bool is_causal=False, *, float? scale=None) -> Tensor
//   _fused_adamw_(Tensor(a!)[] self, Tensor(b!)[] grads, Tensor(c!)[] exp_avgs,
//       Tensor(d!)[] exp_avg_sqs, Tensor(e!)[] max_exp_avg_sqs, Tensor[] state_steps, *,
//       float lr, float beta1, float beta2, float weight_decay, float eps, bool amsgrad,
//       bool maximize, Tensor? grad_scale=None, Tensor? found_inf=None) -> ()
#include "core/torch_features.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

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

std::string cuda_build_version() {
  // A CPU build's hooks throw here; a CUDA build's report the CUDA runtime it was compiled with
  // (major * 1000 + minor * 10), GPU or not.
  try {
    const long version = at::detail::getCUDAHooks().versionCUDART();
    return fmt::format("{}.{}", version / 1000, version % 1000 / 10);
  } catch (const c10::Error&) {
    return "";
  }
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

namespace fused {

at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
#if VESCALE_HAS_FUSED_ATTENTION
  // LibTorch 2.x only: not compiled on the CPU build machine. The default scale is
  // 1/sqrt(q.size(-1)), as the explicit path's; dropout_p 0 as the explicit path applies none.
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                          /*is_causal=*/true);
#else
  (void)q;
  (void)k;
  (void)v;
  throw Error("[dtensor] fused attention needs LibTorch 2.0; this build has " TORCH_VERSION);
#endif
}

void adamw_step(const AdamWLists& lists, const AdamWHyper& hyper) {
  if (lists.params.empty()) return;
#if VESCALE_HAS_FUSED_ADAMW
  // LibTorch 2.1+ only: not compiled on the CPU build machine. The kernel reads each tensor's
  // step from a float32 tensor on its device (and does not advance it); all share one.
  const at::Tensor step =
      at::scalar_tensor(static_cast<double>(hyper.step),
                        at::TensorOptions(at::kFloat).device(lists.params.front().device()));
  const std::vector<at::Tensor> steps(lists.params.size(), step);
  at::_fused_adamw_(lists.params, lists.grads, lists.exp_avgs, lists.exp_avg_sqs,
                    /*max_exp_avg_sqs=*/{}, steps, hyper.lr, hyper.beta1, hyper.beta2,
                    hyper.weight_decay, hyper.eps, /*amsgrad=*/false, /*maximize=*/false);
#else
  (void)hyper;
  throw Error("[optim] fused AdamW needs LibTorch 2.1; this build has " TORCH_VERSION);
#endif
}

}  // namespace fused
}  // namespace vescale
