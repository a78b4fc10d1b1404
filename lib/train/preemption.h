// Stopping a job cleanly when its processes are asked to: SIGTERM / SIGINT.
//
// NOTE [Preemption]
// A scheduler (Slurm's `srun --signal`, torchrun, Kubernetes, or this program's local launcher
// passing on a Ctrl-C) tells a job to stop with SIGTERM or SIGINT, to one process or to all of
// them. The handler only sets an atomic flag (async-signal-safe). After each step, every rank
// all-reduces its flag (MAX, one float, over the world group): the ranks AGREE whether to stop,
// even when only one of them got the signal, so no rank waits forever in a collective the others
// left. When they agree, every rank has finished the same step; the job saves a checkpoint of
// that step (checkpoint.format, the normal COMMIT protocol, through JobCheckpointer, in
// <dump_folder>/checkpoints even where checkpoint.interval = 0: a preempted job's work is kept),
// waits for any asynchronous write in flight to commit, and exits with kPreemptedExitCode (4),
// which launchers and scripts tell apart from a failure (1), a config error (2) and divergence
// (3). Resume with --checkpoint.load=latest. A second signal ends the process at once (the
// default action of the signal), for an operator who does not want to wait for the save. The
// last step is not interrupted: a job that finishes its steps exits 0 as usual.
#pragma once

#include "comm/group.h"

namespace vescale {

/// The exit code of a job that stopped on SIGTERM/SIGINT after saving (NOTE [Preemption]).
constexpr int kPreemptedExitCode = 4;

/// While it lives, the first SIGTERM or SIGINT to this process sets the preemption flag; the
/// second one ends the process with the signal's default action. Restores the old handlers when
/// destroyed. One at a time per process.
class PreemptionHandler {
 public:
  PreemptionHandler();
  ~PreemptionHandler();
  PreemptionHandler(const PreemptionHandler&) = delete;
  PreemptionHandler& operator=(const PreemptionHandler&) = delete;
};

/// The signal that asked this process to stop, or 0.
int preemption_signal();

/// Whether any rank of `world` was asked to stop: the MAX of every rank's flag, so every rank
/// returns the same. *Collective* over `world`; one all-reduce of one float.
bool agree_to_stop(const comm::Group& world);

}  // namespace vescale
