// What the commands that run a job's model on its ranks share (train, eval, generate): the mesh
// as run_on_ranks names it, the preflight, each rank's device and world group, and the model
// checkpoint a --checkpoint option names.
#pragma once

#include <string>

#include "comm/group.h"
#include "config/job_config.h"
#include "launch/launch_env.h"

namespace vescale::app {

/// The ranks a launcher (torchrun, Slurm, Open MPI, the local one) started this process among,
/// which parallel.dp = "auto" divides; 0 without one.
int64_t launched_world();

/// "the mesh of job.toml (parallel.pp x dp x tp = 1 x 2 x 2)", for run_on_ranks.
std::string mesh_of(const JobConfig& c);

/// The preflight (train/preflight.h) as train runs it: a single process, or a worker under an
/// outside launcher, scans the data as it builds its task, so it is not scanned twice.
void precheck(const JobConfig& c);

/// Binds this rank's device and connects the job's world group, whose flight recorder dumps to
/// <dump_folder>/flight/rank-N.json (NOTE [Flight recorder]); rank 0 says which device, backend
/// and fast paths the job uses.
comm::Group connect_job(const JobConfig& config, const LaunchEnv& env);

/// The model checkpoint `path` names for `command` ("eval"): "latest" is the config's dump
/// folder's newest committed step; a step folder, checkpoints or dump folder, merged .h5, or
/// hf:DIR. Opened once here, so that a wrong path is one error line before any process starts.
std::string open_model_checkpoint(const JobConfig& config, const std::string& path,
                                  const std::string& command);

}  // namespace vescale::app
