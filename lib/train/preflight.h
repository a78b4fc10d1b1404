// The preflight: everything that can be checked of a job before any process starts or any
// tensor is allocated, in one place, so that `train`, `plan lint` and `plan auto` refuse the same
// jobs with the same message (a mistake is one line and nothing is written).
#pragma once

#include <optional>

#include "config/job_config.h"
#include "core/device.h"
#include "data/token_data.h"
#include "dmodule/parallelize.h"

namespace vescale {

/// What the preflight found: the plan as it resolves on the job mesh (with its warnings), and
/// the token data when it was scanned.
struct Preflight {
  ResolvedPlan plan;
  std::optional<TokenData> tokens;
};

struct PreflightOptions {
  /// Map and scan the token data (sizes, vocabulary: NOTE [Vocabulary check]) rather than only
  /// checking that its files are there. A single process skips it: it scans them as it builds
  /// its task.
  bool scan_data = true;
  /// Check the memory and device of the workers this machine would start (not under torchrun,
  /// Slurm or Open MPI, which place their own).
  bool local_workers = true;
};

/// What a layout of the job needs to hold: the plan against the model (declared, not allocated)
/// on rank 0 of the job mesh, and the pipeline's stage split. What plan auto checks per layout.
ResolvedPlan check_layout(const JobConfig& config);

/// check_layout, then the data (its files; scanned with `options.scan_data`), the local workers'
/// memory, and the device and backend local rank 0 would resolve ("cuda" without a GPU, NCCL
/// without it). Throws UserError naming the file, key or tensor.
Preflight preflight(const JobConfig& config, const PreflightOptions& options);

/// Whether a node of `local_ranks` ranks and `gpus` GPUs shares them under `config` (NOTE [Ranks
/// sharing a GPU]); throws UserError where it would and `config` has not opted in: Gloo with CUDA
/// tensors is GPU code no GPU has run (NOTE [GPU-verified]), taken only with
/// training.unverified_kernels.
bool check_gpu_sharing(const JobConfig& config, int local_ranks, int gpus = cuda_device_count());

}  // namespace vescale
