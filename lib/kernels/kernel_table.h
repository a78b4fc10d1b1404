// NOTE [Kernel table]
// Every op with more than one kernel has one table here: its paths in the order they are tried,
// each with what it needs. The first path whose needs hold runs; the last path of a table (the
// explicit kernel, the float64 reference) holds everywhere.
//   attention         KV cache > cp ring > fused > blocked > explicit
//   AdamW             fused > foreach
//   linear            at::linear > mm + bias add
//   matmul precision  TF32 > float32
//   LM loss           our CUDA kernel > log-softmax > widened log-softmax > pass by pass (NOTE
//                     [Fused LM loss])
//   SwiGLU            our CUDA kernel (NOTE [CUDA kernels]) > silu and product
//   rotary            our CUDA kernel > explicit rotary
//   residual add + norm  our CUDA kernel > add, then the norm (kernels/add_norm.h)
//   MoE experts       our grouped GEMM kernel > one expert after another (NOTE [Grouped experts])
// A path needs a build flag (the LibTorch version that brings its kernel, NOTE [Version
// guards], or nvcc for ours) and run-time conditions on a KernelContext: the device and dtype, and
// for attention whether a KV cache (NOTE [KV cache]) or a context-parallel ring (NOTE [Ring
// attention]) is open. The order is the contract: a KV cache or a ring comes before every local
// kernel, since those would see this forward's or this rank's tokens only (the fused kernel once
// ran ahead of the ring). The KV cache's and the ring's kernels need dtensor/ state, so their rows
// name no kernel: ops::causal_attention runs them when the table picks them. Who dispatches through
// the tables: ops::causal_attention, ops::linear (kernels::linear), AdamW::step, the job's matmul
// precision (configure_matmul_precision), the fused LM loss (local::linear_cross_entropy, whose
// rows name no kernel either: their chunks all-reduce over the vocabulary's groups), ops::swiglu
// (kernels::swiglu), ops::rotary (kernels::rotary) and ops::add_layer_norm / ops::add_rms_norm
// (kernels::add_norm) and the mixture of experts' local experts (kernels::run_experts). The
// `[device]` line (fast_paths_summary) and `--version` (build_summary, a line a row) are written
// from the tables, and tests/kernels/kernel_table_test runs every path of every table against the
// explicit one.
//
// NOTE [GPU-verified]
// A row that only CUDA takes (its conditions hold on no other device) is GPU code: the CPU tests
// never run it, and one such row, the log-softmax loss with ATen's half_to_float flag on bf16
// logits, landed with CPU tests only and failed at the first bf16 step on an H100 (issue [31]).
// So each CUDA row records the last scripts/gpu-check.sh run that took it and passed: the date
// and the GPU as nvidia-smi names it (`gpu_run`). A CUDA row with no such run is not taken: the
// next row that holds runs instead, and the `[device]` line says why; training.unverified_kernels
// = true opts in (set_unverified_kernels, process-wide). gpu-check opts in on its CUDA runs and
// prints the rows each passing run took (taken_rows(), the `[kernels]` line at the end of a
// run), with the `gpu_run` to write into the row. The last row of a table is never CUDA-only.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <array>
#include <atomic>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/version_guards.h"
#include "kernels/adamw_update.h"
#include "kernels/add_norm.h"
#include "kernels/grouped_experts.h"

namespace vescale::kernels {

/// The LibTorch kernels a build has (NOTE [Version guards]). A field of the context, so that
/// tests can ask the tables about other builds than their own.
struct BuildFlags {
  bool fused_attention = VESCALE_HAS_FUSED_ATTENTION;  ///< LibTorch 2.0
  bool fused_adamw = VESCALE_HAS_FUSED_ADAMW;          ///< LibTorch 2.1
  bool tf32_control = VESCALE_HAS_TF32_CONTROL;        ///< LibTorch 1.12
  bool cuda_kernels = VESCALE_HAS_CUDA_KERNELS;        ///< nvcc built lib/kernels/cuda
};
inline constexpr BuildFlags kThisBuild{};

/// bf16 or float16: the types whose matmuls and losses accumulate in float32.
inline bool is_half_or_bf16(at::ScalarType t) {
  return t == at::kBFloat16 || t == at::kHalf;
}

/// Whether CUDA rows that no GPU has run are taken (training.unverified_kernels; NOTE
/// [GPU-verified]). Process-wide, off until set; the default of every KernelContext.
void set_unverified_kernels(bool take);
bool unverified_kernels();

/// What a table needs to know to pick a path.
struct KernelContext {
  Device device = kCpu;
  at::ScalarType dtype = at::kFloat;
  bool kv_cache = false;  ///< a KvCacheScope is open (generation)
  bool cp_ring = false;   ///< a context-parallel ring is open
  BuildFlags build = kThisBuild;
  bool vocab_split = false;                ///< the LM loss's vocabulary is split over ranks
  bool unverified = unverified_kernels();  ///< take CUDA rows no GPU has run (NOTE [GPU-verified])
  bool masked_targets = false;  ///< the LM loss's targets hold a loss mask (NOTE [Loss masks])
};

/// The last gpu-check run that took a CUDA row and passed (NOTE [GPU-verified]).
struct GpuRun {
  const char* date;  ///< "2026-11-27"; nullptr: the row has not run on a GPU
  const char* gpu;   ///< as nvidia-smi names it: "NVIDIA H100 80GB HBM3"
};
inline constexpr GpuRun kNotYetRun{nullptr, nullptr};

/// Why a path cannot run in a context ("CUDA only"), or nullptr when it can.
using Unmet = const char* (*)(const KernelContext&);

/// One row of a table.
template <typename Id, typename Fn>
struct KernelPath {
  Id id;
  const char* name;         ///< as the `[device]` line names it: "fused attention"
  bool BuildFlags::*built;  ///< the build flag it needs, or nullptr
  const char* needs;        ///< what brings that flag ("LibTorch 2.0", "nvcc"), or nullptr
  Unmet unmet;              ///< its run-time conditions
  Fn* run;          ///< its kernel; nullptr where its caller runs it or there is nothing to run
  bool summarised;  ///< named in the `[device]` line (and, with a build flag, in --version)
  bool cuda_only;   ///< only CUDA takes it (NOTE [GPU-verified])
  GpuRun gpu_run;   ///< a CUDA row's last GPU run, or kNotYetRun
  /// Set once a dispatch takes the row in this process (taken_rows()).
  mutable std::atomic<bool> taken{false};
};

// ---- the tables -------------------------------------------------------------------------------

enum class AttentionPathId { kKvCache, kCpRing, kFused, kBlocked, kExplicit };
/// softmax(q k^T / sqrt(D) + causal mask) v for q, k, v of shape [B, H, T, D].
using AttentionFn = at::Tensor(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);
using AttentionPath = KernelPath<AttentionPathId, AttentionFn>;
extern const std::array<AttentionPath, 5> kAttentionPaths;

enum class AdamWPathId { kFused, kForeach };
using AdamWFn = void(const AdamWLists& lists, const AdamWHyper& hyper);
using AdamWPath = KernelPath<AdamWPathId, AdamWFn>;
extern const std::array<AdamWPath, 2> kAdamWPaths;

enum class LinearPathId { kAtLinear, kMmAdd };
/// x w^T + b for x [..., in], w [out, in], b [out] or undefined.
using LinearFn = at::Tensor(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b);
using LinearPath = KernelPath<LinearPathId, LinearFn>;
extern const std::array<LinearPath, 2> kLinearPaths;

enum class MatmulPrecisionId { kTf32, kFloat32 };
/// Sets the process's float32 matmul precision.
using MatmulPrecisionFn = void();
using MatmulPrecisionPath = KernelPath<MatmulPrecisionId, MatmulPrecisionFn>;
extern const std::array<MatmulPrecisionPath, 2> kMatmulPrecisionPaths;

/// NOTE [Fused LM loss]: how a chunk's loss and gradient come from its logits. The rows name no
/// kernel: local::linear_cross_entropy runs them (the passes all-reduce over the vocabulary).
enum class LossPathId {
  kKernel,      ///< our CUDA kernel: the loss and the gradient in one kernel (NOTE [CUDA kernels])
  kLogSoftmax,  ///< ATen's log-softmax and its backward on float32 or float64 logits
  kWidenedLogSoftmax,  ///< the same on bf16 or float16 logits widened to float32 first
  kPasses,             ///< max, exp, sum and the gradient pass by pass (any vocabulary split)
};
using LossFn = void();
using LossPath = KernelPath<LossPathId, LossFn>;
extern const std::array<LossPath, 4> kLossPaths;

enum class SwigluPathId { kCudaKernel, kExplicit };
/// silu(gate) * up for gate and up alike (SwiGLU's product, before its down projection).
using SwigluFn = at::Tensor(const at::Tensor& gate, const at::Tensor& up);
using SwigluPath = KernelPath<SwigluPathId, SwigluFn>;
extern const std::array<SwigluPath, 2> kSwigluPaths;

enum class RotaryPathId { kCudaKernel, kExplicit };
/// Rotary embedding of x [B, H, T, D] at `positions` [T] (local::rotary's contract).
using RotaryFn = at::Tensor(const at::Tensor& x, double theta, const at::Tensor& positions);
using RotaryPath = KernelPath<RotaryPathId, RotaryFn>;
extern const std::array<RotaryPath, 2> kRotaryPaths;

enum class AddNormPathId { kCudaKernel, kExplicit };
/// (x + delta, norm(x + delta)) over the last dim (kernels/add_norm.h); b undefined for RMSNorm.
using AddNormFn = std::pair<at::Tensor, at::Tensor>(NormKind kind, const at::Tensor& x,
                                                    const at::Tensor& delta, const at::Tensor& w,
                                                    const at::Tensor& b, double eps);
using AddNormPath = KernelPath<AddNormPathId, AddNormFn>;
extern const std::array<AddNormPath, 2> kAddNormPaths;

enum class ExpertsPathId { kGroupedKernel, kOneByOne };
/// Rows ordered by expert through their experts (local::run_experts's contract).
using ExpertsFn = at::Tensor(const at::Tensor& h, const at::Tensor& counts,
                             const std::vector<ExpertWeights>& experts, double grad_scale);
using ExpertsPath = KernelPath<ExpertsPathId, ExpertsFn>;
extern const std::array<ExpertsPath, 2> kExpertsPaths;

/// Calls `visit(table, op)` for every table and the op it serves, in the order of the `[device]`
/// line.
template <typename Visit>
void for_each_table(Visit&& visit) {
  visit(kAttentionPaths, "attention");
  visit(kAdamWPaths, "AdamW");
  visit(kLinearPaths, "linear");
  visit(kMatmulPrecisionPaths, "matmul precision");
  visit(kLossPaths, "LM loss");
  visit(kSwigluPaths, "SwiGLU");
  visit(kRotaryPaths, "rotary");
  visit(kAddNormPaths, "residual add + norm");
  visit(kExpertsPaths, "MoE experts");
}

// ---- choosing ---------------------------------------------------------------------------------

/// Whether a GPU has run `path`, or it needs none (not CUDA-only).
template <typename Path>
bool gpu_verified(const Path& path) {
  return !path.cuda_only || path.gpu_run.date != nullptr;
}

/// Whether `path` can run in `context`.
template <typename Path>
bool holds(const Path& path, const KernelContext& context) {
  return (path.built == nullptr || context.build.*path.built) && path.unmet(context) == nullptr &&
         (gpu_verified(path) || context.unverified);
}

inline constexpr const char* kNotYetRunOnAGpu =
    "not yet run on a GPU; training.unverified_kernels = true takes it";

/// Why `path` cannot run in `context` ("needs LibTorch 2.0", "CUDA only"), or "" when it can.
template <typename Path>
std::string why_not(const Path& path, const KernelContext& context) {
  if (path.built != nullptr && !(context.build.*path.built))
    return std::string("needs ") + path.needs;
  if (const char* unmet = path.unmet(context); unmet != nullptr) return unmet;
  return gpu_verified(path) || context.unverified ? std::string() : kNotYetRunOnAGpu;
}

/// The first path of `table` that holds in `context` (the last holds everywhere).
template <typename Path, size_t N>
const Path& choose(const std::array<Path, N>& table, const KernelContext& context) {
  for (const Path& path : table) {
    if (holds(path, context)) return path;
  }
  return table.back();
}

/// Marks `path` as taken by a dispatch of this process (taken_rows()); returns it.
template <typename Path>
const Path& mark_taken(const Path& path) {
  if (!path.taken.load(std::memory_order_relaxed))
    path.taken.store(true, std::memory_order_relaxed);
  return path;
}

/// choose(), for a dispatch that runs the path: marks it taken.
template <typename Path, size_t N>
const Path& take(const std::array<Path, N>& table, const KernelContext& context) {
  return mark_taken(choose(table, context));
}

// ---- dispatch and summaries -------------------------------------------------------------------

/// x w^T + b (b may be undefined) by the first linear path for x's device and dtype.
at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b);

/// silu(gate) * up by the first SwiGLU path for gate's device and dtype.
at::Tensor swiglu(const at::Tensor& gate, const at::Tensor& up);
/// Rotary embedding by the first rotary path for x's device and dtype.
at::Tensor rotary(const at::Tensor& x, double theta, const at::Tensor& positions);
/// (x + delta, norm(x + delta)) by the first residual add + norm path for x's device and dtype.
std::pair<at::Tensor, at::Tensor> add_norm(NormKind kind, const at::Tensor& x,
                                           const at::Tensor& delta, const at::Tensor& w,
                                           const at::Tensor& b, double eps);

/// Rows `h` ordered by expert, `counts` (int64 [E]) for each of `experts`, through their
/// experts by the first MoE experts path for h's device and dtype (NOTE [Grouped experts]).
at::Tensor run_experts(const at::Tensor& h, const at::Tensor& counts,
                       const std::vector<ExpertWeights>& experts, double grad_scale = 1.0);

/// Sets float32 matmuls to TF32 ("high") where the matmul precision table picks TF32 for a job
/// computing `dtype` on `device`; process-wide. Returns whether it did.
bool configure_matmul_precision(Device device, at::ScalarType dtype);

/// For the `[device]` line: each summarised path of each table, on or off and why, for a job
/// computing `dtype` on `device`: "fused attention on, blocked attention off (fused attention
/// instead), fused AdamW on, TF32 matmuls off (float64 is the reference)".
std::string fast_paths_summary(Device device, at::ScalarType dtype);

/// For --version: "LibTorch 1.13.0 (CPU only); fast paths built in: ..." or, for a CUDA build,
/// "LibTorch 2.6.0 (CUDA 12.4, NCCL 2.22.3; no GPU visible); fast paths built in: ...", then a
/// line a row of every table: "  attention: fused attention: CUDA, GPU-verified 2026-11-27
/// NVIDIA H100 80GB HBM3". `nccl_version` is comm::nccl_version() ("" without NCCL).
std::string build_summary(const std::string& nccl_version);

/// "GPU-verified 2026-11-27 NVIDIA H100 80GB HBM3", or "not yet run on a GPU" (NOTE
/// [GPU-verified]).
std::string gpu_run_text(const GpuRun& run);

/// The rows dispatches took in this process, in table order: "fused attention, at::linear, ...".
std::string taken_rows();

}  // namespace vescale::kernels
