#include "kernels/kernel_table.h"

#include <ATen/Context.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

#include "core/error.h"
#include "kernels/fused.h"
#include "kernels/local_kernels.h"

namespace vescale::kernels {
namespace {

const char* unmet_nothing(const KernelContext&) {
  return nullptr;
}

const char* unmet_kv_cache(const KernelContext& c) {
  return c.kv_cache ? nullptr : "no KV cache open";
}

const char* unmet_cp_ring(const KernelContext& c) {
  return c.cp_ring ? nullptr : "no context-parallel ring";
}

const char* unmet_cuda(const KernelContext& c) {
  return c.device.is_cuda() ? nullptr : "CUDA only";
}

const char* unmet_not_float64(const KernelContext& c) {
  return c.dtype == at::kDouble ? "float64 is the reference" : nullptr;
}

/// NOTE [Fast paths]: CUDA, never float64.
const char* unmet_fast(const KernelContext& c) {
  const char* cuda = unmet_cuda(c);
  return cuda != nullptr ? cuda : unmet_not_float64(c);
}

const char* unmet_tf32(const KernelContext& c) {
  // TF32 rounds float32 operands only; half and bfloat16 matmuls are unaffected by it.
  const char* fast = unmet_fast(c);
  if (fast != nullptr) return fast;
  return c.dtype == at::kFloat ? nullptr : "float32 only";
}

void set_tf32_matmuls() {
#if VESCALE_HAS_TF32_CONTROL
  at::globalContext().setFloat32MatmulPrecision("high");
#else
  throw Error("[kernels] TF32 matmuls need LibTorch 1.12; this build has " TORCH_VERSION);
#endif
}

/// "X on", "X off (why)" or "X off (Y instead)" for a summarised path of `table`.
template <typename Path, size_t N>
std::string path_state(const Path& path, const std::array<Path, N>& table,
                       const KernelContext& context) {
  std::string why = why_not(path, context);
  if (const Path& chosen = choose(table, context); why.empty() && &chosen != &path)
    why = fmt::format("{} instead", chosen.name);
  return why.empty() ? fmt::format("{} on", path.name) : fmt::format("{} off ({})", path.name, why);
}

}  // namespace

// clang-format off
const std::array<AttentionPath, 5> kAttentionPaths{{
    {AttentionPathId::kKvCache, "KV cache", nullptr, nullptr, unmet_kv_cache, nullptr, false},
    {AttentionPathId::kCpRing, "ring attention", nullptr, nullptr, unmet_cp_ring, nullptr, false},
    {AttentionPathId::kFused, "fused attention", &BuildFlags::fused_attention, "2.0", unmet_fast,
     fused::causal_attention, true},
    {AttentionPathId::kBlocked, "blocked attention", nullptr, nullptr, unmet_not_float64,
     local::blocked_causal_attention, true},
    {AttentionPathId::kExplicit, "explicit attention", nullptr, nullptr, unmet_nothing,
     local::causal_attention, false},
}};

const std::array<AdamWPath, 2> kAdamWPaths{{
    {AdamWPathId::kFused, "fused AdamW", &BuildFlags::fused_adamw, "2.1", unmet_fast,
     fused::adamw_step, true},
    {AdamWPathId::kForeach, "foreach AdamW", nullptr, nullptr, unmet_nothing, local::adamw_step,
     false},
}};

const std::array<LinearPath, 2> kLinearPaths{{
    {LinearPathId::kAtLinear, "at::linear", nullptr, nullptr, unmet_cuda, local::aten_linear,
     false},
    {LinearPathId::kMmAdd, "mm + bias add", nullptr, nullptr, unmet_nothing, local::linear_mm_add,
     false},
}};

// The float32 row sets nothing: it is LibTorch's default ("highest").
const std::array<MatmulPrecisionPath, 2> kMatmulPrecisionPaths{{
    {MatmulPrecisionId::kTf32, "TF32 matmuls", &BuildFlags::tf32_control, "1.12", unmet_tf32,
     set_tf32_matmuls, true},
    {MatmulPrecisionId::kFloat32, "float32 matmuls", nullptr, nullptr, unmet_nothing, nullptr,
     false},
}};
// clang-format on

at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  return choose(kLinearPaths, {x.device(), x.scalar_type()}).run(x, w, b);
}

bool configure_matmul_precision(Device device, at::ScalarType dtype) {
  // A named context: GCC 14 takes a reference bound from a temporary argument for dangling.
  const KernelContext context{device, dtype};
  const MatmulPrecisionPath& path = choose(kMatmulPrecisionPaths, context);
  if (path.run == nullptr) return false;
  path.run();
  return true;
}

std::string fast_paths_summary(Device device, at::ScalarType dtype) {
  const KernelContext context{device, dtype};
  std::vector<std::string> states;
  for_each_table([&](const auto& table) {
    for (const auto& path : table) {
      if (path.summarised) states.push_back(path_state(path, table, context));
    }
  });
  return fmt::format("{}", fmt::join(states, ", "));
}

std::string build_summary(const std::string& nccl_version) {
  std::vector<std::string> built;
  for_each_table([&](const auto& table) {
    for (const auto& path : table) {
      if (path.summarised && path.built != nullptr && kThisBuild.*path.built)
        built.emplace_back(path.name);
    }
  });
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

}  // namespace vescale::kernels
