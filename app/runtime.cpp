#include "runtime.h"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "comm/peer_watch.h"
#include "config/memory_estimate.h"
#include "core/allocator_settings.h"
#include "core/error.h"
#include "core/heartbeat.h"
#include "core/logging.h"
#include "core/thread_budget.h"
#include "launch/local_launcher.h"

extern char** environ;

namespace vescale::app {
namespace {

std::string self_executable(const std::string& fallback) {
  char path[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return fallback;
  return std::string(path, static_cast<size_t>(n));
}

}  // namespace

int run_this_binary(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {self_executable("/proc/self/exe")};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> raw;
  for (auto& a : argv)
    raw.push_back(a.data());
  raw.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  VS_CHECK(pid >= 0, "cannot start {} {}: {}", argv[0], fmt::join(args, " "), std::strerror(errno));
  if (pid == 0) {
    // The child (a local launcher, whose workers die with it) dies with this process, however
    // it ends: `timeout` or SIGTERM to plan auto leaves no calibration run behind.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::execve(raw[0], raw.data(), environ);
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void print(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

int run_on_ranks(int nproc, const std::string& wanted_by, const Invocation& invocation,
                 const std::function<int(const LaunchEnv&)>& body, LocalLaunchOptions launch) {
  std::optional<LaunchEnv> env = detect_launch_env();
  if (env) {
    VS_USER_CHECK(nproc == 0 || nproc == env->world,
                  "{} needs {} processes, but {} started {}: start {} (or change the mesh)",
                  wanted_by, nproc, env->source, env->world, nproc);
  } else if (nproc > 1) {
    check_local_processes(nproc, wanted_by, physical_memory_bytes());
    launch.nproc = nproc;
    launch.argv = invocation.argv;
    launch.argv[0] = self_executable(invocation.argv[0]);
    init_logging({0, 1, false, invocation.log_level});
    const LaunchOutcome outcome = run_local_workers(launch);
    if (outcome.preempted) {
      spdlog::info("[launch] every worker saved and stopped on the signal; exit code {}",
                   outcome.exit_code);
    } else if (outcome.exit_code != 0) {
      spdlog::error("[launch] {}", outcome.failure);
      print_flight_diagnosis(launch.flight_folder);  // NOTE [Flight recorder]
    } else if (outcome.restarts > 0) {
      spdlog::info("[launch] done after {} restart{}", outcome.restarts,
                   outcome.restarts == 1 ? "" : "s");
    }
    return outcome.exit_code;
  } else {
    env = LaunchEnv{};
    env->source = "single process";
  }
  heartbeat::start_from_env();  // NOTE [Heartbeat]: local workers tell the launcher they live
  init_logging({env->rank, env->world, env->source != "local", invocation.log_level});
  const std::string threads = apply_thread_budget(thread_budget_from_env(env->local_world));
  const std::string allocator = apply_allocator_settings();  // NOTE [Allocator settings]
  if (env->rank == 0) {
    spdlog::info("{}", threads);
    spdlog::info("{}", allocator);
  }
  return body(*env);
}

comm::Group connect_world(const LaunchEnv& env, comm::GroupOptions options) {
  heartbeat::set_stall_limit(options.timeout);
  // The local launcher's workers meet in a file store: no port (NOTE [Local rendezvous]).
  comm::Store store = env.world == 1 ? comm::Store::in_memory()
                      : !env.store_file.empty()
                          ? comm::Store::file(env.store_file, env.world, options.timeout)
                          : comm::Store::tcp(env.master_addr, env.master_port, env.rank, env.world,
                                             options.timeout, !env.agent_store);
  const std::string attempt =
      env.agent_store ? fmt::format("/vescale/attempt_{}", env.restart_count) : std::string();
  if (!attempt.empty()) store = store.prefixed(attempt);
  const bool loopback = env.master_addr == "127.0.0.1" || env.master_addr == "localhost";
  if (!loopback) options.gloo_host.clear();  // bind to this host's name, not loopback
  comm::Group group = comm::Group::create(store, env.rank, env.world, options);
  // NOTE [Peer heartbeat]: where no launcher of ours watches every rank.
  if (env.world > 1 && env.store_file.empty())
    comm::peer_watch::start({env.master_addr, env.master_port, attempt, env.rank, env.world,
                             !env.agent_store && env.rank == 0});
  return group;
}

}  // namespace vescale::app
