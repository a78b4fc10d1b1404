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
  /// Of `parameters`, the routed experts' of a mixture of experts (0: dense): a rank holds
  /// 1 / ep of them (NOTE [Expert parallelism]).
  double expert_parameters = 0;
  /// The state one rank holds under the config's layout, the model spread evenly over pp x tp:
  /// the dense parameters' split over their dp x cp replicas as parallel.zero says (1: the
  /// optimizer state, 2: and the gradients, 3: and the parameters), the experts' 1 / ep of them
  /// split over their dp x cp / ep replicas.
  double dense_state_per_rank_bytes = 0;
  double expert_state_per_rank_bytes = 0;
  /// The least any rank can hold: the state split over every rank (as ZeRO-3 would; the
  /// experts' too, ep x dp x cp / ep ranks for dp x cp) plus one micro-batch's logits and their
  /// gradient on its tp shard.
  double per_rank_floor_bytes = 0;
  /// What one micro-batch's forward keeps for its backward on a rank of n_layer / pp blocks
  /// with the activations sharded over tp (sequence parallel), at the peak of its backward,
  /// under training.activation_checkpoint (0 for a family without transformer blocks).
  double activation_bytes = 0;
};

/// The sizes that set a transformer block's activations on one rank.
struct ActivationShape {
  double n_embd = 0, n_head = 0, seq_len = 0, tp = 1;
  bool sp = false;           ///< sequence parallel: what lies between attention and MLP is split
  double element_bytes = 4;  ///< of the compute dtype
  /// Context parallelism: attention runs as a ring, which keeps no T x T probabilities (the 5
  /// heads T term), only q, k, v and the output, already counted per token.
  bool ring = false;
};

/// What a rank's transformer blocks keep for their backward, in bytes per token of a micro-batch
/// on that rank (T / cp of each sequence under context parallelism).
/// A block keeps (Korthikanti et al. 2022, at 2 bytes an element) 34 C + 5 heads T without tp,
/// 10 C + 24 C / tp + 5 heads T / tp with tp, 34 C / tp + 5 heads T / tp with sequence
/// parallelism; recomputing the attention core (selective) drops its 5 heads T; recomputing the
/// block (full) keeps only its input, C (C / tp with sp) elements, and while one block's
/// backward reruns it, that block's whole activations are live once more.
struct BlockActivations {
  double kept = 0;     ///< by `blocks` blocks until their backward
  double working = 0;  ///< on top, while a recomputed block runs its backward
};
/// For `blocks` blocks of `shape`, every activation_checkpoint_every-th one recomputing as `c`
/// says.
BlockActivations block_activations(const JobConfig& c, const ActivationShape& shape, double blocks);

/// Bytes of an element of `c`'s compute dtype (training.dtype): 8, 4 or 2 (bfloat16).
double compute_element_bytes(const JobConfig& c);

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
/// The one check of every command that starts `nproc` local processes (train, eval, generate,
/// comm bench, plan auto): each needs kWorkerBaseBytes before any model state; throws a UserError
/// naming `wanted_by` (e.g. "--nproc 4096") when they cannot fit `memory_bytes` (<= 0: unknown,
/// no check).
void check_local_processes(int64_t nproc, const std::string& wanted_by, double memory_bytes);
/// kWorkerBaseBytes plus its floor of the model (and its activations when they live in this
/// memory: `activations_here`), cannot fit in `memory_bytes` (0: no check), so
/// `--parallel.tp=65536` is an error instead of 65536 processes being started.
void check_local_workers_fit(const JobConfig& c, double memory_bytes, bool activations_here);

}  // namespace vescale
