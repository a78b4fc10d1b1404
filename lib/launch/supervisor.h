// Supervising the local launcher's workers: one attempt run until every worker has ended, the
// first failure stopping the rest, signals to the launcher passed on, an unresponsive rank named
// (NOTE [Heartbeat]). Internal to launch/.
#pragma once

#include <signal.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "launch/liveness.h"
#include "launch/local_launcher.h"
#include "launch/worker_process.h"

namespace vescale::detail {

/// While it lives, SIGINT and SIGTERM to the launcher are counted in g_signals (for the workers)
/// instead of ending it.
class SignalForwarding {
 public:
  SignalForwarding();
  ~SignalForwarding();
  SignalForwarding(const SignalForwarding&) = delete;
  SignalForwarding& operator=(const SignalForwarding&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
  struct sigaction old_hup_ {};
  struct sigaction old_usr1_ {};
};

using Clock = std::chrono::steady_clock;

/// The workers and what supervising them has found so far.
struct Supervision {
  std::vector<Worker> workers;
  int alive = 0;
  LaunchOutcome outcome;
  std::optional<Clock::time_point> kill_deadline;  ///< when SIGTERM'd workers get SIGKILL
  int signals_handled = 0;                         ///< of g_signals, passed on to the workers
  int preempted = 0;  ///< workers that exited with options.preempted_exit_code
  std::optional<LivenessMonitor> liveness;       ///< NOTE [Heartbeat]
  bool described = false;                        ///< the failure names its cause already
  std::string flight_folder;                     ///< LocalLaunchOptions::flight_folder
  uint64_t dump_requests_handled = 0;            ///< SIGUSR1s to the launcher passed on
  std::optional<Clock::time_point> diagnose_at;  ///< when to print the dumps' diagnosis
};

/// How long workers get to dump their flight recorders after SIGUSR1 (NOTE [Flight recorder]).
constexpr std::chrono::milliseconds kFlightDumpGrace{3000};

/// Runs the workers of one attempt until every one has ended.
Supervision supervise(const LocalLaunchOptions& options, const std::vector<std::string>& argv,
                      int attempt);

/// Whether a failed attempt is one to restart: not asked to stop, a crash rather than an exit
/// code that says the job cannot go on, and restarts left.
bool restartable(const Supervision& s, const LocalLaunchOptions& options, int attempt);
/// The same but for the restarts left (an elastic launch counts them per worker slot).
bool restartable_failure(const Supervision& s, const LocalLaunchOptions& options);

}  // namespace vescale::detail
