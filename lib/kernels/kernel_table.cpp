#include "kernels/kernel_table.h"

#include <ATen/Context.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

#include "core/error.h"
#include "kernels/cuda_kernels.h"
#include "kernels/fused.h"
#include "kernels/local_kernels.h"
#include "kernels/rotary.h"
#include "kernels/swiglu.h"

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

/// ATen's log-softmax loss: CUDA, the whole vocabulary on the rank.
const char* unmet_log_softmax(const KernelContext& c) {
  if (const char* cuda = unmet_cuda(c); cuda != nullptr) return cuda;
  if (c.masked_targets) return "the targets hold a loss mask";
  return c.vocab_split ? "the vocabulary is split over ranks" : nullptr;
}

const char* unmet_float_log_softmax(const KernelContext& c) {
  if (const char* unmet = unmet_log_softmax(c); unmet != nullptr) return unmet;
  return is_half_or_bf16(c.dtype) ? "float32 and float64 logits only" : nullptr;
}

const char* unmet_widened_log_softmax(const KernelContext& c) {
  if (const char* unmet = unmet_log_softmax(c); unmet != nullptr) return unmet;
  return is_half_or_bf16(c.dtype) ? nullptr : "bfloat16 and float16 logits only";
}

/// Our one-kernel loss: CUDA, not float64, the whole vocabulary on the rank (a split one needs
/// its all-reduces between the max and the sum).
const char* unmet_loss_kernel(const KernelContext& c) {
  if (const char* unmet = unmet_log_softmax(c); unmet != nullptr) return unmet;
  return unmet_not_float64(c);
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

/// "X on", "X on (GPU-verified ...)" for a CUDA row, "X off (why)" or "X off (Y instead)" for
/// a summarised path of `table`.
template <typename Path, size_t N>
std::string path_state(const Path& path, const std::array<Path, N>& table,
                       const KernelContext& context) {
  std::string why = why_not(path, context);
  if (const Path& chosen = choose(table, context); why.empty() && &chosen != &path)
    why = fmt::format("{} instead", chosen.name);
  if (!why.empty()) return fmt::format("{} off ({})", path.name, why);
  if (path.cuda_only) return fmt::format("{} on ({})", path.name, gpu_run_text(path.gpu_run));
  return fmt::format("{} on", path.name);
}

/// Where a row runs, for --version: "CUDA, LibTorch 2.0 (built in), GPU-verified ...".
template <typename Path>
std::string row_facts(const Path& path) {
  std::vector<std::string> facts;
  facts.emplace_back(path.cuda_only ? "CUDA" : "any device");
  if (path.built != nullptr) {
    facts.push_back(fmt::format("{} ({})", path.needs,
                                kThisBuild.*path.built ? "built in" : "not in this build"));
  }
  if (path.cuda_only) facts.push_back(gpu_run_text(path.gpu_run));
  return fmt::format("{}", fmt::join(facts, ", "));
}

std::atomic<bool> g_unverified{false};

// NOTE [GPU-verified]: the run that verified the rows below it, issue [31]'s gpu-check of
// 2026-11-27 on one H100 (code 49168d9): float64 and float32 parity of GPT and Llama on CUDA
// (log-softmax loss, fused attention, fused AdamW, at::linear, TF32 matmuls in float32) and the
// bf16 GPT-2 124M bench (fused attention, fused AdamW, at::linear), all within their bars.
constexpr GpuRun kH100Nov27{"2026-11-27", "NVIDIA H100 80GB HBM3"};

}  // namespace

void set_unverified_kernels(bool take) {
  g_unverified.store(take, std::memory_order_relaxed);
}

bool unverified_kernels() {
  return g_unverified.load(std::memory_order_relaxed);
}

std::string gpu_run_text(const GpuRun& run) {
  return run.date == nullptr ? std::string("not yet run on a GPU")
                             : fmt::format("GPU-verified {} {}", run.date, run.gpu);
}

// clang-format off
const std::array<AttentionPath, 5> kAttentionPaths{{
    {AttentionPathId::kKvCache, "KV cache", nullptr, nullptr, unmet_kv_cache, nullptr, false,
     false, kNotYetRun},
    {AttentionPathId::kCpRing, "ring attention", nullptr, nullptr, unmet_cp_ring, nullptr, false,
     false, kNotYetRun},
    {AttentionPathId::kFused, "fused attention", &BuildFlags::fused_attention, "LibTorch 2.0",
     unmet_fast, fused::causal_attention, true, true, kH100Nov27},
    {AttentionPathId::kBlocked, "blocked attention", nullptr, nullptr, unmet_not_float64,
     local::blocked_causal_attention, true, false, kNotYetRun},
    {AttentionPathId::kExplicit, "explicit attention", nullptr, nullptr, unmet_nothing,
     local::causal_attention, false, false, kNotYetRun},
}};

const std::array<AdamWPath, 2> kAdamWPaths{{
    {AdamWPathId::kFused, "fused AdamW", &BuildFlags::fused_adamw, "LibTorch 2.1", unmet_fast,
     fused::adamw_step, true, true, kH100Nov27},
    {AdamWPathId::kForeach, "foreach AdamW", nullptr, nullptr, unmet_nothing, local::adamw_step,
     false, false, kNotYetRun},
}};

const std::array<LinearPath, 2> kLinearPaths{{
    {LinearPathId::kAtLinear, "at::linear", nullptr, nullptr, unmet_cuda, local::aten_linear,
     false, true, kH100Nov27},
    {LinearPathId::kMmAdd, "mm + bias add", nullptr, nullptr, unmet_nothing, local::linear_mm_add,
     false, false, kNotYetRun},
}};

// The float32 row sets nothing: it is LibTorch's default ("highest").
const std::array<MatmulPrecisionPath, 2> kMatmulPrecisionPaths{{
    {MatmulPrecisionId::kTf32, "TF32 matmuls", &BuildFlags::tf32_control, "LibTorch 1.12",
     unmet_tf32, set_tf32_matmuls, true, true, kH100Nov27},
    {MatmulPrecisionId::kFloat32, "float32 matmuls", nullptr, nullptr, unmet_nothing, nullptr,
     false, false, kNotYetRun},
}};

// Our kernel and the widened row have not run on a GPU: bf16 on CUDA goes pass by pass until
// one has.
const std::array<LossPath, 4> kLossPaths{{
    {LossPathId::kKernel, "LM loss kernel", &BuildFlags::cuda_kernels, "nvcc", unmet_loss_kernel,
     nullptr, true, true, kNotYetRun},
    {LossPathId::kLogSoftmax, "log-softmax loss", nullptr, nullptr, unmet_float_log_softmax,
     nullptr, true, true, kH100Nov27},
    {LossPathId::kWidenedLogSoftmax, "widened log-softmax loss", nullptr, nullptr,
     unmet_widened_log_softmax, nullptr, true, true, kNotYetRun},
    {LossPathId::kPasses, "pass-by-pass loss", nullptr, nullptr, unmet_nothing, nullptr, false,
     false, kNotYetRun},
}};
// Our kernels have not run on a GPU: on CUDA ATen's ops run in their place until one has.
const std::array<SwigluPath, 2> kSwigluPaths{{
    {SwigluPathId::kCudaKernel, "SwiGLU kernel", &BuildFlags::cuda_kernels, "nvcc", unmet_fast,
     cuda_swiglu, true, true, kNotYetRun},
    {SwigluPathId::kExplicit, "silu and product", nullptr, nullptr, unmet_nothing,
     local::swiglu, false, false, kNotYetRun},
}};
const std::array<RotaryPath, 2> kRotaryPaths{{
    {RotaryPathId::kCudaKernel, "rotary kernel", &BuildFlags::cuda_kernels, "nvcc", unmet_fast,
     cuda_rotary, true, true, kNotYetRun},
    {RotaryPathId::kExplicit, "explicit rotary", nullptr, nullptr, unmet_nothing, local::rotary,
     false, false, kNotYetRun},
}};
const std::array<AddNormPath, 2> kAddNormPaths{{
    {AddNormPathId::kCudaKernel, "add + norm kernel", &BuildFlags::cuda_kernels, "nvcc",
     unmet_fast, cuda_add_norm, true, true, kNotYetRun},
    {AddNormPathId::kExplicit, "add, then norm", nullptr, nullptr, unmet_nothing, local::add_norm,
     false, false, kNotYetRun},
}};
const std::array<ExpertsPath, 2> kExpertsPaths{{
    {ExpertsPathId::kGroupedKernel, "grouped GEMM kernel", &BuildFlags::cuda_kernels, "nvcc",
     unmet_fast, cuda_grouped_experts, true, true, kNotYetRun},
    {ExpertsPathId::kOneByOne, "experts one by one", nullptr, nullptr, unmet_nothing,
     local::run_experts, false, false, kNotYetRun},
}};
// clang-format on

at::Tensor run_experts(const at::Tensor& h, const at::Tensor& counts,
                       const std::vector<ExpertWeights>& experts, double grad_scale) {
  const KernelContext context{h.device(), h.scalar_type()};
  return take(kExpertsPaths, context).run(h, counts, experts, grad_scale);
}

std::pair<at::Tensor, at::Tensor> add_norm(NormKind kind, const at::Tensor& x,
                                           const at::Tensor& delta, const at::Tensor& w,
                                           const at::Tensor& b, double eps) {
  const KernelContext context{x.device(), x.scalar_type()};
  return take(kAddNormPaths, context).run(kind, x, delta, w, b, eps);
}

at::Tensor rotary(const at::Tensor& x, double theta, const at::Tensor& positions) {
  const KernelContext context{x.device(), x.scalar_type()};
  return take(kRotaryPaths, context).run(x, theta, positions);
}

at::Tensor swiglu(const at::Tensor& gate, const at::Tensor& up) {
  const KernelContext context{gate.device(), gate.scalar_type()};
  return take(kSwigluPaths, context).run(gate, up);
}

at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  // A named context: GCC 14 takes a reference bound from a temporary argument for dangling.
  const KernelContext context{x.device(), x.scalar_type()};
  return take(kLinearPaths, context).run(x, w, b);
}

bool configure_matmul_precision(Device device, at::ScalarType dtype) {
  const KernelContext context{device, dtype};
  const MatmulPrecisionPath& path = take(kMatmulPrecisionPaths, context);
  if (path.run == nullptr) return false;
  path.run();
  return true;
}

std::string fast_paths_summary(Device device, at::ScalarType dtype) {
  const KernelContext context{device, dtype};
  std::vector<std::string> states;
  for_each_table([&](const auto& table, const char*) {
    for (const auto& path : table) {
      if (path.summarised) states.push_back(path_state(path, table, context));
    }
  });
  return fmt::format("{}", fmt::join(states, ", "));
}

std::string build_summary(const std::string& nccl_version) {
  std::vector<std::string> built, rows;
  for_each_table([&](const auto& table, const char* op) {
    for (const auto& path : table) {
      if (path.summarised && path.built != nullptr && kThisBuild.*path.built)
        built.emplace_back(path.name);
      rows.push_back(fmt::format("  {}: {}: {}", op, path.name, row_facts(path)));
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
      "LibTorch {} ({}); fast paths built in: {} (used on CUDA, never in float64)\n"
      "CUDA kernels of our own: {}\n"
      "kernel table, each op's rows in the order tried (a CUDA row no GPU has run is taken only "
      "with training.unverified_kernels = true):\n{}",
      TORCH_VERSION, backend,
      built.empty() ? std::string("none") : fmt::format("{}", fmt::join(built, ", ")),
      cuda_kernels::build_text(), fmt::join(rows, "\n"));
}

std::string taken_rows() {
  std::vector<std::string> names;
  for_each_table([&](const auto& table, const char*) {
    for (const auto& path : table) {
      if (path.taken.load(std::memory_order_relaxed)) names.emplace_back(path.name);
    }
  });
  return names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace vescale::kernels
