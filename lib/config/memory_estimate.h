#pragma once
// What a job's model would need, from its config alone, before anything is built: so that
// `model.n_layer = 1000000000` is a config error naming the memory, not a process that allocates
// until it is killed.

#include <cstdint>

#include "config/job_config.h"

namespace vescale {

struct MemoryEstimate {
  double parameters = 0;   ///< the model's parameters (padded vocabulary included)
  double state_bytes = 0;  ///< parameters, gradients and optimizer state of the whole model
  /// The least any rank can hold: the state split over every rank (as ZeRO-3 would) plus one
  /// micro-batch's logits and their gradient on its tp shard.
  double per_rank_floor_bytes = 0;
};

/// From the model sizes, dtype, optimizer, batch and mesh of `c` (all computed in double, so
/// absurd values do not overflow).
MemoryEstimate estimate_memory(const JobConfig& c);

/// This machine's physical memory in bytes (0 if unknown).
double physical_memory_bytes();

/// Throws UserError naming the sizes when `estimate_memory(c).per_rank_floor_bytes` exceeds
/// `memory_bytes` (0: no check).
void check_fits_memory(const JobConfig& c, double memory_bytes);

/// The least a worker process takes before it holds any model state (the runtime: LibTorch,
/// Gloo, allocator arenas), a lower bound measured at ~200 MiB resident here.
constexpr double kWorkerBaseBytes = 128.0 * 1024 * 1024;

/// Throws UserError when the local launcher's `c.world_size()` workers, each at least
/// kWorkerBaseBytes plus its floor of the model, cannot fit in `memory_bytes` (0: no check), so
/// `--parallel.tp=65536` is an error instead of 65536 processes being started.
void check_local_workers_fit(const JobConfig& c, double memory_bytes);

}  // namespace vescale
