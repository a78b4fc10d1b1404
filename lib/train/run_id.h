// A training run's identity in its checkpoints (NOTE [Checkpoint integrity]): a random id drawn
// when a run starts, kept when it resumes, and the rule that a new run does not mix its steps into
// another run's checkpoints folder.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace vescale {

/// 16 random hex digits.
std::string draw_run_id();

/// Makes `dir` (a checkpoints folder) ready for run `run_id` to save into from step
/// `start_step` on: a committed step of another run there is refused (a UserError naming the
/// folder and the ways out), or deleted when `overwrite`; so is a committed step of this run newer
/// than `start_step` (a rollback), which the run would otherwise meet only when saving over it.
/// When `resuming`, steps of version 1 files (no run id) count as this run's.
void claim_checkpoints_folder(const std::filesystem::path& dir, const std::string& run_id,
                              bool resuming, bool overwrite, int64_t start_step);

}  // namespace vescale
