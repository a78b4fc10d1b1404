#include "launch/local_launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>

#include "core/error.h"
#include "core/stop_signals.h"
#include "core/thread_budget.h"
#include "core/write_fully.h"
#include "launch/liveness.h"

extern char** environ;

namespace vescale {
namespace {

std::atomic<int> g_signals{0};  ///< stop requests the launcher got so far: 1, then forced

/// NOTE [One stop request, several signals]: a signal within the window of the first is the
/// same request, not a second one.
void on_signal(int sig) {
  if (note_stop_signal(sig) != StopSignal::kSameRequest) g_signals.fetch_add(1);
}

struct Worker {
  int rank = 0;
  pid_t pid = -1;
  int out_fd = -1;  // read ends of the worker's stdout, stderr and heartbeat pipes
  int err_fd = -1;
  int beat_fd = -1;
  std::string out_partial, err_partial, beat_partial;
  std::string last_line;
  bool running = true;
  int status = 0;
};

/// The launcher's own output: a failed write (a closed terminal) is not worth failing for.
void write_all(int fd, const std::string& text) {
  (void)write_fully(fd, text);
}

/// Environment of a worker: ours, plus its rank variables, minus stale ones.
std::vector<std::string> worker_env(const LocalLaunchOptions& options, int rank,
                                    const std::string& store_file, int beat_fd, int attempt) {
  const char* overridden[] = {"RANK=",
                              "WORLD_SIZE=",
                              "LOCAL_RANK=",
                              "LOCAL_WORLD_SIZE=",
                              "MASTER_ADDR=",
                              "MASTER_PORT=",
                              "VESCALE_LAUNCHER=",
                              "VESCALE_RESTART_COUNT=",
                              "VESCALE_STORE_FILE=",
                              "VESCALE_HEARTBEAT_FD="};
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    bool skip = false;
    for (const char* prefix : overridden)
      skip = skip || entry.rfind(prefix, 0) == 0;
    if (!skip) env.push_back(entry);
  }
  env.push_back(fmt::format("RANK={}", rank));
  env.push_back(fmt::format("WORLD_SIZE={}", options.nproc));
  env.push_back(fmt::format("LOCAL_RANK={}", rank));
  env.push_back(fmt::format("LOCAL_WORLD_SIZE={}", options.nproc));
  env.push_back(fmt::format("MASTER_ADDR={}", options.master_addr));
  env.push_back(fmt::format("VESCALE_STORE_FILE={}", store_file));  // NOTE [Local rendezvous]
  env.push_back(fmt::format("VESCALE_HEARTBEAT_FD={}", beat_fd));   // NOTE [Heartbeat]
  env.push_back("VESCALE_LAUNCHER=local");
  env.push_back(fmt::format("VESCALE_RESTART_COUNT={}", attempt));
  // NOTE [Thread budget]: the workers' OpenBLAS reads its threads when it loads, so the budget
  // travels in the environment.
  const ThreadBudget budget = thread_budget_from_env(options.nproc);
  if (std::getenv("OMP_NUM_THREADS") == nullptr)
    env.push_back(fmt::format("OMP_NUM_THREADS={}", budget.intra_op));
  if (std::getenv("OPENBLAS_NUM_THREADS") == nullptr)
    env.push_back(fmt::format("OPENBLAS_NUM_THREADS={}", budget.blas));
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings)
    out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

Worker spawn(const LocalLaunchOptions& options, std::vector<std::string> argv, int rank,
             const std::string& store_file, int attempt) {
  int out_pipe[2], err_pipe[2], beat_pipe[2];
  VS_CHECK(::pipe(out_pipe) == 0 && ::pipe(err_pipe) == 0 && ::pipe(beat_pipe) == 0,
           "[launch] pipe() failed: {}", std::strerror(errno));
  // Our read ends are not for the workers spawned after this one.
  for (int fd : {out_pipe[0], err_pipe[0], beat_pipe[0]})
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  std::vector<std::string> env = worker_env(options, rank, store_file, beat_pipe[1], attempt);
  std::vector<char*> c_argv = c_strings(argv);
  std::vector<char*> c_env = c_strings(env);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  VS_CHECK(pid >= 0, "[launch] fork() failed: {}", std::strerror(errno));
  if (pid == 0) {
#ifdef __linux__
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
#endif
    // Signals reach a worker from its launcher only, once (NOTE [Preemption]): a terminal's
    // Ctrl-C to the whole foreground group would otherwise be a first and, passed on, a second.
    ::setpgid(0, 0);
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    ::close(err_pipe[0]);
    ::close(err_pipe[1]);
    ::execve(c_argv[0], c_argv.data(), c_env.data());
    const std::string message = fmt::format("cannot run {}: {}\n", c_argv[0], std::strerror(errno));
    write_all(STDERR_FILENO, message);
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  ::close(beat_pipe[1]);
  for (int fd : {out_pipe[0], err_pipe[0], beat_pipe[0]})
    ::fcntl(fd, F_SETFL, O_NONBLOCK);
  Worker w;
  w.rank = rank;
  w.pid = pid;
  w.out_fd = out_pipe[0];
  w.err_fd = err_pipe[0];
  w.beat_fd = beat_pipe[0];
  return w;
}

/// Reads what is available on `fd` and hands each complete line to `on_line`; at end of file
/// (or an error) also the unfinished last one when `flush_unfinished`, then closes `fd` (-1).
/// Returns false at end of file.
template <typename OnLine>
bool read_lines(int& fd, std::string& partial, bool flush_unfinished, OnLine&& on_line) {
  char buffer[65536];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n > 0) {
      partial.append(buffer, static_cast<size_t>(n));
    } else if (flush_unfinished && !partial.empty()) {
      partial.push_back('\n');
    }
    size_t start = 0, end;
    while ((end = partial.find('\n', start)) != std::string::npos) {
      on_line(partial.substr(start, end - start));
      start = end + 1;
    }
    partial.erase(0, start);
    if (n <= 0) {
      ::close(fd);
      fd = -1;
      return false;
    }
  }
}

/// Reads the heartbeat lines available from a worker into `monitor` (NOTE [Heartbeat]).
void read_beats(Worker& w, LivenessMonitor& monitor) {
  const auto now = LivenessMonitor::Clock::now();
  read_lines(w.beat_fd, w.beat_partial, false,
             [&](const std::string& line) { monitor.on_line(w.rank, line, now); });
}

/// Forwards the complete lines available on `fd` (prefixed "[rank N] " when `prefix`), and what
/// is left at end of file; returns false at end of file.
bool pump(Worker& w, int& fd, std::string& partial, int to_fd, bool prefix) {
  std::string out;
  const bool open = read_lines(fd, partial, true, [&](const std::string& line) {
    if (!line.empty()) w.last_line = line;
    out += prefix ? fmt::format("[rank {}] {}\n", w.rank, line) : line + "\n";
    if (out.size() >= 65536) {  // a flood is passed on as it comes, not held
      write_all(to_fd, out);
      out.clear();
    }
  });
  write_all(to_fd, out);
  return open;
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return fmt::format("was killed by signal {} ({})", sig, strsignal(sig));
  }
  return fmt::format("exited with code {}", WEXITSTATUS(status));
}

bool failed(int status) {
  return WIFSIGNALED(status) || WEXITSTATUS(status) != 0;
}

bool preempted(int status, const LocalLaunchOptions& options) {
  return options.preempted_exit_code != 0 && WIFEXITED(status) &&
         WEXITSTATUS(status) == options.preempted_exit_code;
}

void signal_all(std::vector<Worker>& workers, int sig) {
  for (auto& w : workers) {
    if (w.running) ::kill(w.pid, sig);
  }
}

/// While it lives, SIGINT and SIGTERM to the launcher are counted in g_signals (for the workers)
/// instead of ending it.
class SignalForwarding {
 public:
  SignalForwarding() {
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGINT, &action, &old_int_);
    ::sigaction(SIGTERM, &action, &old_term_);
    g_signals = 0;
    reset_stop_signals();
  }
  ~SignalForwarding() {
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
  }
  SignalForwarding(const SignalForwarding&) = delete;
  SignalForwarding& operator=(const SignalForwarding&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
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
  std::optional<LivenessMonitor> liveness;  ///< NOTE [Heartbeat]
  bool described = false;                   ///< the failure names its cause already
};

std::vector<Worker> spawn_all(const LocalLaunchOptions& options,
                              const std::vector<std::string>& argv, const std::string& store_file,
                              int attempt) {
  std::vector<Worker> workers;
  for (int rank = 0; rank < options.nproc; ++rank)
    workers.push_back(spawn(options, argv, rank, store_file, attempt));
  for (const auto& w : workers) {
    write_all(STDERR_FILENO, fmt::format("[launch] rank {} pid {} (rendezvous file {})\n", w.rank,
                                         w.pid, store_file));
  }
  return workers;
}

// NOTE [Local rendezvous]
// The local launcher's workers meet in a c10d FileStore in a fresh folder of mode 0700 per
// attempt (mkdtemp), removed when the attempt ends: LibTorch 1.13's TCPStore server listens on
// every interface, and workers on one machine need no port at all; nobody else can read or plant
// the file. Gloo's connections bind 127.0.0.1.
class RendezvousFolder {
 public:
  RendezvousFolder() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string(tmp != nullptr && *tmp ? tmp : "/tmp") + "/vescale-rdzv-XXXXXX";
    VS_CHECK(::mkdtemp(pattern.data()) != nullptr,
             "[launch] cannot create a rendezvous folder {}: {}", pattern, std::strerror(errno));
    folder_ = pattern;
  }
  ~RendezvousFolder() {
    std::error_code ignored;
    std::filesystem::remove_all(folder_, ignored);
  }
  RendezvousFolder(const RendezvousFolder&) = delete;
  RendezvousFolder& operator=(const RendezvousFolder&) = delete;

  std::string store_file() const { return folder_ + "/store"; }

 private:
  std::string folder_;
};

/// The open output pipes of the workers, to poll.
enum class PipeKind { kStdout, kStderr, kHeartbeat };

struct Pipes {
  std::vector<pollfd> fds;
  std::vector<std::pair<size_t, PipeKind>> owners;  // worker index, which pipe
};

Pipes open_pipes(const std::vector<Worker>& workers) {
  Pipes pipes;
  for (size_t i = 0; i < workers.size(); ++i) {
    for (auto [fd, kind] : {std::pair{workers[i].out_fd, PipeKind::kStdout},
                            std::pair{workers[i].err_fd, PipeKind::kStderr},
                            std::pair{workers[i].beat_fd, PipeKind::kHeartbeat}}) {
      if (fd < 0) continue;
      pipes.fds.push_back({fd, POLLIN, 0});
      pipes.owners.push_back({i, kind});
    }
  }
  return pipes;
}

/// Waits up to 100 ms for output and forwards it. False once every pipe is closed and every
/// worker has ended.
bool forward_output(Supervision& s, const LocalLaunchOptions& options) {
  Pipes pipes = open_pipes(s.workers);
  if (pipes.fds.empty() && s.alive == 0) return false;
  if (!pipes.fds.empty()) {
    ::poll(pipes.fds.data(), pipes.fds.size(), 100);
  } else {
    ::usleep(100 * 1000);
  }
  for (size_t k = 0; k < pipes.fds.size(); ++k) {
    if (pipes.fds[k].revents == 0) continue;
    Worker& w = s.workers[pipes.owners[k].first];
    if (pipes.owners[k].second == PipeKind::kHeartbeat) {
      read_beats(w, *s.liveness);
    } else if (pipes.owners[k].second == PipeKind::kStderr) {
      pump(w, w.err_fd, w.err_partial, STDERR_FILENO, options.prefix_output);
    } else {
      // Rank 0's stdout is the command's result (a table, a report): forwarded as it is.
      pump(w, w.out_fd, w.out_partial, STDOUT_FILENO, options.prefix_output && w.rank != 0);
    }
  }
  return true;
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
  write_all(STDERR_FILENO,
            fmt::format("[launch] {}; stopping every worker (SIGKILL)\n", s.outcome.failure));
  signal_all(s.workers, SIGKILL);
}

/// Reaps workers that ended; the first failure is the outcome and stops the rest.
void reap_ended(Supervision& s, const LocalLaunchOptions& options) {
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
    } else if (failed(status) && s.outcome.failed_rank < 0) {
      s.outcome.failed_rank = w.rank;
      s.outcome.exit_code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
      s.outcome.failure =
          fmt::format("rank {} (pid {}) {}", w.rank, w.pid, describe_status(status));
      blame_who_it_waited_for(s, w);
      signal_all(s.workers, SIGTERM);
      s.kill_deadline = Clock::now() + options.grace;
    }
  }
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

/// Runs the workers of one attempt until every one has ended.
Supervision supervise(const LocalLaunchOptions& options, const std::vector<std::string>& argv,
                      int attempt) {
  const RendezvousFolder rendezvous;
  Supervision s;
  s.liveness.emplace(options.nproc, LivenessMonitor::Clock::now());
  s.workers = spawn_all(options, argv, rendezvous.store_file(), attempt);
  s.alive = options.nproc;
  while (forward_output(s, options)) {
    reap_ended(s, options);
    stop_others(s, options);
    stop_the_unresponsive(s);
  }
  if (s.outcome.failed_rank < 0 && s.preempted > 0) {
    s.outcome.preempted = true;
    s.outcome.exit_code = options.preempted_exit_code;
  }
  report_failure(s);
  return s;
}

/// Whether a failed attempt is one to restart: not asked to stop, a crash rather than an exit
/// code that says the job cannot go on, and restarts left.
bool restartable(const Supervision& s, const LocalLaunchOptions& options, int attempt) {
  if (s.outcome.failed_rank < 0 || g_signals.load() > 0 || attempt >= options.max_restarts)
    return false;
  const int status = s.workers[s.outcome.failed_rank].status;
  if (WIFSIGNALED(status)) return true;
  for (int code : options.final_exit_codes)
    if (WEXITSTATUS(status) == code) return false;
  return true;
}

}  // namespace

LaunchOutcome run_local_workers(const LocalLaunchOptions& options) {
  VS_CHECK(options.nproc >= 1, "[launch] need at least one worker, got {}", options.nproc);
  VS_CHECK(!options.argv.empty(), "[launch] no worker command");
  SignalForwarding forwarding;
  std::vector<std::string> argv = options.argv;
  for (int attempt = 0;; ++attempt) {
    Supervision s = supervise(options, argv, attempt);  // a fresh rendezvous folder each time
    s.outcome.restarts = attempt;
    if (!restartable(s, options, attempt)) {
      if (s.outcome.failed_rank >= 0 && options.max_restarts > 0 && attempt >= options.max_restarts)
        s.outcome.failure +=
            fmt::format("; no restarts left (--max-restarts {} used up)", options.max_restarts);
      return s.outcome;
    }
    auto [extra, from] = options.plan_restart ? options.plan_restart()
                                              : std::pair<std::vector<std::string>, std::string>{};
    argv = options.argv;
    argv.insert(argv.end(), extra.begin(), extra.end());
    const Worker& w = s.workers[s.outcome.failed_rank];
    write_all(STDERR_FILENO,
              fmt::format("[launch] rank {} {}; restart {} of {} {}\n", w.rank,
                          describe_status(w.status), attempt + 1, options.max_restarts, from));
  }
}

}  // namespace vescale
