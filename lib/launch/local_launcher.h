// The local launcher: runs N workers of this program on loopback and supervises them. Its parts,
// internal to launch/: worker_process (spawning, signals), worker_output (forwarding their lines),
// rendezvous_folder (NOTE [Local rendezvous]) and supervisor (one attempt, until all have ended).
//
// NOTE [Elastic training]
// A job whose parallel.dp is "auto" takes dp = world / (pp x cp x tp) from the ranks it is
// started on; the global batch stays, each rank's rows change. Checkpoints load under any layout
// and the data, the init and the dropout masks are functions of (seed, step), never of the
// layout, so such a job restarted on another world from its newest committed checkpoint draws the
// curve the first world would have drawn, up to summation order: what a failure costs is the
// steps since that checkpoint, recomputed (metrics.jsonl drops their first lines: one line a
// step). Who restarts it:
//   - `train --elastic` (here): each worker slot has --max-restarts restarts of its own; a slot
//     that fails once more is dropped, and every worker restarts on the most slots left whose
//     count gives the config a valid mesh (world_for), or the job stops, naming the lost slots,
//     when that is fewer than --min-ranks. Of workers that died together, the one a signal
//     killed is the failure (the others' collectives broke on its end).
//   - torchrun --nnodes MIN:MAX: its agents re-rendezvous when a node leaves or joins and start
//     every worker again with the new WORLD_SIZE; --checkpoint.load=latest resumes.
// The resumed run logs the layout before and after ("[resume] step N on a new layout: ...").
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
  /// Restarts of all workers after one failed (exited non-zero, or killed by a signal), at most;
  /// elastic, per worker slot.
  int max_restarts = 0;
  /// NOTE [Elastic training]: a worker slot that fails more than max_restarts times is dropped,
  /// and the job restarts on `world_for(slots left)` of the slots left (the most ranks that form
  /// a valid mesh; 0: none), as long as that is at least min_ranks.
  bool elastic = false;
  int min_ranks = 1;
  std::function<int(int slots)> world_for;
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
  int world = 0;           ///< the workers of the last attempt (elastic: after slots dropped)
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
