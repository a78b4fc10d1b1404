// How a subcommand runs on ranks: in this process, under an outside launcher, or by spawning
// local workers that re-run the same command line.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "comm/group.h"
#include "launch/launch_env.h"
#include "launch/local_launcher.h"

namespace vescale::app {

/// The command line of this process, for workers to re-run.
struct Invocation {
  std::vector<std::string> argv;
  std::string log_level = "info";
};

/// Runs `body` once per rank and returns the exit code. If torchrun, Slurm or Open MPI set our
/// rank, runs `body` here (`nproc`, when not 0, must match their world size). Otherwise, with
/// nproc > 1, spawns nproc local workers that re-run `invocation` and supervises them with
/// `launch`'s stop grace, preemption exit code and restart policy (its nproc and argv are set
/// here).
/// `wanted_by` says who wants nproc processes, for the error when a launcher started another
/// number: "--nproc 4", "the mesh of job.toml (parallel.pp x dp x tp = 1 x 2 x 2)".
int run_on_ranks(int nproc, const std::string& wanted_by, const Invocation& invocation,
                 const std::function<int(const LaunchEnv&)>& body, LocalLaunchOptions launch = {});

/// Runs this program's binary with `args` (its output goes to ours) and returns its exit code
/// (128 + the signal when a signal ended it).
int run_this_binary(const std::vector<std::string>& args);

/// Writes `text` to standard output as it is, and flushes it (so that it stands before the
/// output of a process started next).
void print(const std::string& text);

/// Connects the world group of a job. *Collective* over every rank.
comm::Group connect_world(const LaunchEnv& env, comm::GroupOptions options);

}  // namespace vescale::app
