// The training state as checkpoint tensors, and saving and loading it: parameters from the
// parallelized model, optimizer state from the optimizer (each with its own global place), the
// rest in /meta.
#pragma once

#include <cstdint>
#include <string>

#include "checkpoint/checkpoint.h"
#include "train/job.h"

namespace vescale {

/// Saves the job's state after `step` steps to <dump_folder>/checkpoints (checkpoint.format,
/// pruned to checkpoint.keep) and logs where and how long it took. *Collective.*
void save_job(Job& job, int64_t step, const comm::Group& world);

/// Loads parameters (and optimizer state when the checkpoint has it) into this rank's shards,
/// reading only the hyperslabs it holds. Returns the step to continue from.
int64_t load_job(Job& job, const CheckpointReader& reader);

/// checkpoint.load as a path ("latest": the newest committed step of this job's dump folder).
std::string resolve_load_path(const JobConfig& config);

}  // namespace vescale
