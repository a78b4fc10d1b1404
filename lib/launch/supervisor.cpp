#include "launch/supervisor.h"

#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>

#include <filesystem>

#include "comm/flight_diagnosis.h"
#include "core/error.h"
#include "core/stop_signals.h"
#include "launch/rendezvous_folder.h"
#include "launch/worker_output.h"

namespace vescale::detail {
namespace {

std::atomic<int> g_signals{0};  ///< stop requests the launcher got so far: 1, then forced
std::atomic<uint64_t> g_dump_requests{0};  ///< SIGUSR1s the launcher got so far

void on_dump_request(int) {
  g_dump_requests.fetch_add(1);
}

/// NOTE [One stop request, several signals]: a signal within the window of the first is the
/// same request, not a second one.
void on_signal(int sig) {
  if (note_stop_signal(sig) != StopSignal::kSameRequest) g_signals.fetch_add(1);
}

bool preempted(int status, const LocalLaunchOptions& options) {
  return options.preempted_exit_code != 0 && WIFEXITED(status) &&
         WEXITSTATUS(status) == options.preempted_exit_code;
}

/// A worker failed, perhaps because its collective timed out waiting for another rank: when a
/// rank has been silent or stuck for half its limit, the outcome names it first (NOTE
/// [Heartbeat]), with the failed worker as its victim.
void blame_who_it_waited_for(Supervision& s, const Worker& victim) {
  const auto suspect = s.liveness->check(LivenessMonitor::Clock::now(), 0.5);
  if (!suspect || suspect->rank == victim.rank) return;
  const Worker& w = s.workers[static_cast<size_t>(suspect->rank)];
  s.outcome.failed_rank = w.rank;
  s.outcome.failure = fmt::format(
      "rank {} (pid {}) stopped answering: it {}; rank {} {} waiting "
      "for it{}",
      w.rank, w.pid, suspect->why, victim.rank, describe_status(victim.status),
      victim.last_line.empty() ? "" : fmt::format(" (its last line: {})", victim.last_line));
  s.described = true;
}

/// Stops the job at once when a rank stopped answering (NOTE [Heartbeat]): its collectives can
/// never complete, so nothing could be saved; the report names that rank.
void stop_the_unresponsive(Supervision& s) {
  if (s.outcome.failed_rank >= 0 || s.signals_handled > 0 || s.preempted > 0) return;
  const auto found = s.liveness->check(LivenessMonitor::Clock::now());
  if (!found) return;
  const Worker& w = s.workers[static_cast<size_t>(found->rank)];
  s.outcome.failed_rank = w.rank;
  s.outcome.exit_code = 1;
  s.outcome.failure =
      fmt::format("rank {} (pid {}) stopped answering: it {}", w.rank, w.pid, found->why);
  s.described = true;
  if (s.flight_folder.empty()) {
    write_all(STDERR_FILENO,
              fmt::format("[launch] {}; stopping every worker (SIGKILL)\n", s.outcome.failure));
    signal_all(s.workers, SIGKILL);
    return;
  }
  // NOTE [Flight recorder]: every worker that can dumps before it is killed.
  write_all(STDERR_FILENO,
            fmt::format("[launch] {}; asking every worker to dump its flight recorder (SIGUSR1), "
                        "then stopping them (SIGKILL in {} s)\n",
                        s.outcome.failure, kFlightDumpGrace.count() / 1000));
  signal_all(s.workers, SIGUSR1);
  s.kill_deadline = Clock::now() + kFlightDumpGrace;
}

/// Passes a SIGUSR1 the launcher got on to the workers, and prints the diagnosis of their dumps
/// once they had time to write them.
void pass_on_dump_requests(Supervision& s) {
  const uint64_t requests = g_dump_requests.load();
  if (requests != s.dump_requests_handled) {
    s.dump_requests_handled = requests;
    signal_all(s.workers, SIGUSR1);
    if (!s.flight_folder.empty()) s.diagnose_at = Clock::now() + kFlightDumpGrace;
  }
  if (s.diagnose_at && Clock::now() >= *s.diagnose_at) {
    s.diagnose_at.reset();
    vescale::print_flight_diagnosis(s.flight_folder);
  }
}

/// Reaps workers that ended; the first failure is the outcome and stops the rest. Of failures
/// reaped together, a worker killed by a signal is the cause (the others' collectives broke on
/// its end), so a SIGKILLed rank is named, not a peer that saw its socket close.
void reap_ended(Supervision& s, const LocalLaunchOptions& options) {
  std::vector<const Worker*> failures;
  for (auto& w : s.workers) {
    if (!w.running) continue;
    int status = 0;
    if (::waitpid(w.pid, &status, WNOHANG) != w.pid) continue;
    w.running = false;
    w.status = status;
    --s.alive;
    s.liveness->on_exit(w.rank);
    if (preempted(status, options)) {
      // The others agreed to stop too (NOTE [Preemption]) and are saving: no signal for them,
      // only a deadline in case one hangs.
      ++s.preempted;
      if (!s.kill_deadline) s.kill_deadline = Clock::now() + options.stop_grace;
    } else if (failed(status)) {
      failures.push_back(&w);
    }
  }
  if (failures.empty() || s.outcome.failed_rank >= 0) return;
  const auto signalled = std::find_if(failures.begin(), failures.end(),
                                      [](const Worker* w) { return WIFSIGNALED(w->status); });
  const Worker& w = signalled != failures.end() ? **signalled : *failures.front();
  s.outcome.failed_rank = w.rank;
  s.outcome.exit_code = WIFSIGNALED(w.status) ? 128 + WTERMSIG(w.status) : WEXITSTATUS(w.status);
  s.outcome.failure = fmt::format("rank {} (pid {}) {}", w.rank, w.pid, describe_status(w.status));
  blame_who_it_waited_for(s, w);
  signal_all(s.workers, SIGTERM);
  s.kill_deadline = Clock::now() + options.grace;
}

/// Passes a signal the launcher got on to the workers, and SIGKILLs those still running once
/// the grace time after a stop is over.
void stop_others(Supervision& s, const LocalLaunchOptions& options) {
  const int signals = g_signals.load();
  if (signals == 1 && s.signals_handled == 0) {
    write_all(STDERR_FILENO,
              "[launch] asked to stop: passing SIGTERM on to the workers, which save and exit "
              "(a second signal, 2 s or more after the first, kills them at once)\n");
    signal_all(s.workers, SIGTERM);
    s.kill_deadline = Clock::now() + options.stop_grace;
  } else if (signals > s.signals_handled) {
    write_all(STDERR_FILENO, "[launch] asked to stop again: killing the workers (SIGKILL)\n");
    signal_all(s.workers, SIGKILL);
    s.kill_deadline.reset();
  }
  s.signals_handled = signals;
  if (s.kill_deadline && Clock::now() > *s.kill_deadline) {
    signal_all(s.workers, SIGKILL);
    s.kill_deadline.reset();
  }
}

/// The failure with the failed worker's last line and how many others were stopped.
void report_failure(Supervision& s) {
  if (s.outcome.failed_rank < 0) return;
  const Worker& w = s.workers[s.outcome.failed_rank];
  if (!w.last_line.empty() && !s.described)
    s.outcome.failure += fmt::format("; its last line: {}", w.last_line);
  int stopped = 0;
  for (const auto& other : s.workers)
    stopped += other.rank != w.rank && failed(other.status);
  if (stopped > 0) s.outcome.failure += fmt::format(" ({} other workers were stopped)", stopped);
}

}  // namespace

SignalForwarding::SignalForwarding() {
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, &old_int_);
  ::sigaction(SIGTERM, &action, &old_term_);
  ::sigaction(SIGHUP, &action, &old_hup_);  // a closed terminal: the workers save and stop
  struct sigaction dump {};
  dump.sa_handler = on_dump_request;
  sigemptyset(&dump.sa_mask);
  ::sigaction(SIGUSR1, &dump, &old_usr1_);
  g_signals = 0;
  reset_stop_signals();
}

SignalForwarding::~SignalForwarding() {
  ::sigaction(SIGINT, &old_int_, nullptr);
  ::sigaction(SIGTERM, &old_term_, nullptr);
  ::sigaction(SIGHUP, &old_hup_, nullptr);
  ::sigaction(SIGUSR1, &old_usr1_, nullptr);
}

Supervision supervise(const LocalLaunchOptions& options, const std::vector<std::string>& argv,
                      int attempt) {
  const RendezvousFolder rendezvous;
  Supervision s;
  s.flight_folder = options.flight_folder;
  if (!s.flight_folder.empty()) {
    // This attempt's dumps only.
    std::error_code ec;
    for (const comm::FlightDumpFile& dump : comm::flight_dumps(s.flight_folder))
      std::filesystem::remove(dump.path, ec);
  }
  s.liveness.emplace(options.nproc, LivenessMonitor::Clock::now());
  s.workers = spawn_all(options, argv, rendezvous.store_file(), attempt);
  s.alive = options.nproc;
  while (forward_output(s, options)) {
    reap_ended(s, options);
    stop_others(s, options);
    stop_the_unresponsive(s);
    pass_on_dump_requests(s);
  }
  if (s.outcome.failed_rank < 0 && s.preempted > 0) {
    s.outcome.preempted = true;
    s.outcome.exit_code = options.preempted_exit_code;
  }
  report_failure(s);
  return s;
}

bool restartable(const Supervision& s, const LocalLaunchOptions& options, int attempt) {
  return attempt < options.max_restarts && restartable_failure(s, options);
}

bool restartable_failure(const Supervision& s, const LocalLaunchOptions& options) {
  if (s.outcome.failed_rank < 0 || g_signals.load() > 0) return false;
  const int status = s.workers[s.outcome.failed_rank].status;
  if (WIFSIGNALED(status)) return true;
  for (int code : options.final_exit_codes)
    if (WEXITSTATUS(status) == code) return false;
  return true;
}

}  // namespace vescale::detail

namespace vescale {

void print_flight_diagnosis(const std::string& folder) {
  if (folder.empty() || comm::flight_dumps(folder).empty()) return;
  try {
    detail::write_all(STDERR_FILENO, comm::diagnose_flight(folder));
  } catch (const Error& e) {
    detail::write_all(
        STDERR_FILENO,
        fmt::format("[launch] no diagnosis of the flight recorder dumps: {}\n", e.what()));
  }
}

}  // namespace vescale
