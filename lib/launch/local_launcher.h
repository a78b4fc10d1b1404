// The local launcher: runs N workers of this program on loopback and supervises them.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace vescale {

struct LocalLaunchOptions {
  int nproc = 1;
  /// The worker command line; argv[0] is the executable (e.g. /proc/self/exe).
  std::vector<std::string> argv;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  ///< 0: a free port
  /// Time the other workers get to stop after SIGTERM before SIGKILL.
  std::chrono::milliseconds grace{std::chrono::seconds(5)};
  /// Prefix each output line with "[rank N] ", except rank 0's stdout (the command's result).
  bool prefix_output = true;
};

struct LaunchOutcome {
  int exit_code = 0;  ///< 0, the failed worker's code, or 128 + its signal
  int failed_rank = -1;
  /// "rank 2 (pid 4242) was killed by signal 9 (Killed); last line: ...". Empty on success.
  std::string failure;
};

/// Spawns options.nproc workers with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
/// MASTER_PORT and VESCALE_LAUNCHER=local set, forwards their stdout and stderr line by line, and
/// waits. When a worker fails, the others get SIGTERM then SIGKILL; SIGINT or SIGTERM to the
/// launcher reaches every worker. Workers die with the launcher (PR_SET_PDEATHSIG).
LaunchOutcome run_local_workers(const LocalLaunchOptions& options);

}  // namespace vescale
