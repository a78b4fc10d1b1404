// The local launcher: runs N workers of this program on loopback and supervises them. Its parts,
// internal to launch/: worker_process (spawning, signals), worker_output (forwarding their lines),
// rendezvous_folder (NOTE [Local rendezvous]) and supervisor (one attempt, until all have ended).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace vescale {

struct LocalLaunchOptions {
  int nproc = 1;
  /// The worker command line; argv[0] is the executable (e.g. /proc/self/exe).
  std::vector<std::string> argv;
  std::string master_addr = "127.0.0.1";
  /// Time the other workers get to stop after SIGTERM before SIGKILL, when one failed.
  std::chrono::milliseconds grace{std::chrono::seconds(5)};
  /// Time the workers get to save and exit after the launcher passed on a SIGTERM or SIGINT
  /// (NOTE [Preemption]) before SIGKILL; a second signal to the launcher SIGKILLs them at once.
  std::chrono::milliseconds stop_grace{std::chrono::seconds(300)};
  /// The exit code of a worker that saved and stopped on a signal (0: none). Such a worker is
  /// no failure: the others stop on their own, and the launcher exits with this code.
  int preempted_exit_code = 0;
  /// Restarts of all workers after one failed (exited non-zero, or killed by a signal), at most.
  int max_restarts = 0;
  /// Exit codes of a failed worker that end the job without a restart (config errors, ...).
  std::vector<int> final_exit_codes;
  /// How to restart: arguments appended to `argv` and where the run goes on from ("from step
  /// 20"). Called once per restart, after every worker of the failed attempt ended.
  std::function<std::pair<std::vector<std::string>, std::string>()> plan_restart;
  /// Prefix each output line with "[rank N] ", except rank 0's stdout (the command's result).
  bool prefix_output = true;
  /// Where the workers dump their flight recorders (NOTE [Flight recorder]; "": they do not).
  /// Emptied of dumps before each attempt. A rank found unresponsive makes every worker dump
  /// (SIGUSR1) before they are killed; SIGUSR1 to the launcher is passed on to the workers; and
  /// the diagnosis of the dumps is printed after a failed attempt, or 2 s after a SIGUSR1.
  std::string flight_folder;
};

struct LaunchOutcome {
  int exit_code = 0;  ///< 0, the failed worker's code, 128 + its signal, or preempted_exit_code
  int failed_rank = -1;
  int restarts = 0;        ///< how many times the workers were restarted
  bool preempted = false;  ///< every worker saved and stopped on a signal
  /// "rank 2 (pid 4242) was killed by signal 9 (Killed); last line: ...". Empty on success.
  std::string failure;
};

/// Spawns options.nproc workers with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
/// VESCALE_STORE_FILE (NOTE [Local rendezvous]), VESCALE_HEARTBEAT_FD (NOTE [Heartbeat]) and
/// VESCALE_LAUNCHER=local set, forwards their stdout and stderr line by line, and waits. A rank
/// that stops answering stops the job, named. When a worker fails, the others get SIGTERM then
/// SIGKILL, and all are restarted (a fresh rendezvous, VESCALE_RESTART_COUNT set) up to
/// max_restarts times. The first SIGINT
/// or SIGTERM to the launcher reaches every worker as SIGTERM, the second as SIGKILL. Workers
/// run in their own process group (a terminal's Ctrl-C reaches the launcher only) and die with
/// the launcher (PR_SET_PDEATHSIG). With options.flight_folder, the workers' flight recorder
/// dumps are diagnosed (NOTE [Flight recorder]).
LaunchOutcome run_local_workers(const LocalLaunchOptions& options);

/// Prints to stderr the diagnosis of the flight recorder dumps in `folder` (NOTE [Flight
/// recorder]), if there are any.
void print_flight_diagnosis(const std::string& folder);

}  // namespace vescale
