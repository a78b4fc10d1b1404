// NOTE [Kernel table]
// Every op with more than one kernel has one table here: its paths in the order they are tried,
// each with what it needs. The first path whose needs hold runs; the last path of a table (the
// explicit kernel, the float64 reference) holds everywhere.
//   attention         KV cache > cp ring > fused > blocked > explicit
//   AdamW             fused > foreach
//   linear            at::linear > mm + bias add
//   matmul precision  TF32 > float32
// A path needs a build flag (the LibTorch version that brings its kernel, NOTE [Version
// guards]) and run-time conditions on a KernelContext: the device and dtype, and for attention
// whether a KV cache (NOTE [KV cache]) or a context-parallel ring (NOTE [Ring attention]) is
// open. The order is the contract: a KV cache or a ring comes before every local kernel, since
// those would see this forward's or this rank's tokens only (the fused kernel once ran ahead of
// the ring). The KV cache's and the ring's kernels need dtensor/ state, so their rows name no
// kernel: ops::causal_attention runs them when the table picks them. Who dispatches through the
// tables: ops::causal_attention, ops::linear (kernels::linear), AdamW::step and the job's matmul
// precision (configure_matmul_precision). The `[device]` line (fast_paths_summary) and
// `--version` (build_summary) are written from the tables, and tests/kernels/kernel_table_test
// runs every path of every table against the explicit one.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <array>
#include <string>

#include "core/device.h"
#include "core/version_guards.h"
#include "kernels/adamw_update.h"

namespace vescale::kernels {

/// The LibTorch kernels a build has (NOTE [Version guards]). A field of the context, so that
/// tests can ask the tables about other builds than their own.
struct BuildFlags {
  bool fused_attention = VESCALE_HAS_FUSED_ATTENTION;  ///< LibTorch 2.0
  bool fused_adamw = VESCALE_HAS_FUSED_ADAMW;          ///< LibTorch 2.1
  bool tf32_control = VESCALE_HAS_TF32_CONTROL;        ///< LibTorch 1.12
};
inline constexpr BuildFlags kThisBuild{};

/// What a table needs to know to pick a path.
struct KernelContext {
  Device device = kCpu;
  at::ScalarType dtype = at::kFloat;
  bool kv_cache = false;  ///< a KvCacheScope is open (generation)
  bool cp_ring = false;   ///< a context-parallel ring is open
  BuildFlags build = kThisBuild;
};

/// Why a path cannot run in a context ("CUDA only"), or nullptr when it can.
using Unmet = const char* (*)(const KernelContext&);

/// One row of a table.
template <typename Id, typename Fn>
struct KernelPath {
  Id id;
  const char* name;         ///< as the `[device]` line names it: "fused attention"
  bool BuildFlags::*built;  ///< the build flag it needs, or nullptr
  const char* since;        ///< the LibTorch version that brings that flag, or nullptr
  Unmet unmet;              ///< its run-time conditions
  Fn* run;          ///< its kernel; nullptr where ops.cpp runs it or where there is nothing to run
  bool summarised;  ///< named in the `[device]` line (and, with a build flag, in --version)
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

/// Calls `visit(table)` for every table, in the order of the `[device]` line.
template <typename Visit>
void for_each_table(Visit&& visit) {
  visit(kAttentionPaths);
  visit(kAdamWPaths);
  visit(kLinearPaths);
  visit(kMatmulPrecisionPaths);
}

// ---- choosing ---------------------------------------------------------------------------------

/// Whether `path` can run in `context`.
template <typename Path>
bool holds(const Path& path, const KernelContext& context) {
  return (path.built == nullptr || context.build.*path.built) && path.unmet(context) == nullptr;
}

/// Why `path` cannot run in `context` ("needs LibTorch 2.0", "CUDA only"), or "" when it can.
template <typename Path>
std::string why_not(const Path& path, const KernelContext& context) {
  if (path.built != nullptr && !(context.build.*path.built))
    return std::string("needs LibTorch ") + path.since;
  const char* unmet = path.unmet(context);
  return unmet == nullptr ? std::string() : std::string(unmet);
}

/// The first path of `table` that holds in `context` (the last holds everywhere).
template <typename Path, size_t N>
const Path& choose(const std::array<Path, N>& table, const KernelContext& context) {
  for (const Path& path : table) {
    if (holds(path, context)) return path;
  }
  return table.back();
}

// ---- dispatch and summaries -------------------------------------------------------------------

/// x w^T + b (b may be undefined) by the first linear path for x's device and dtype.
at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b);

/// Sets float32 matmuls to TF32 ("high") where the matmul precision table picks TF32 for a job
/// computing `dtype` on `device`; process-wide. Returns whether it did.
bool configure_matmul_precision(Device device, at::ScalarType dtype);

/// For the `[device]` line: each summarised path of each table, on or off and why, for a job
/// computing `dtype` on `device`: "fused attention on, blocked attention off (fused attention
/// instead), fused AdamW on, TF32 matmuls off (float64 is the reference)".
std::string fast_paths_summary(Device device, at::ScalarType dtype);

/// For --version: "LibTorch 1.13.0 (CPU only); fast paths built in: ..." or, for a CUDA build,
/// "LibTorch 2.6.0 (CUDA 12.4, NCCL 2.22.3; no GPU visible); fast paths built in: ...".
/// `nccl_version` is comm::nccl_version() ("" without NCCL).
std::string build_summary(const std::string& nccl_version);

}  // namespace vescale::kernels
