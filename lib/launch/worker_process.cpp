#include "launch/worker_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/thread_budget.h"
#include "launch/worker_output.h"

extern char** environ;

namespace vescale::detail {
namespace {

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

}  // namespace

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

void signal_all(std::vector<Worker>& workers, int sig) {
  for (auto& w : workers) {
    if (w.running) ::kill(w.pid, sig);
  }
}

}  // namespace vescale::detail
