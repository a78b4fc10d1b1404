#include "launch/local_launcher.h"

#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "launch/supervisor.h"
#include "launch/worker_output.h"
#include "launch/worker_process.h"

namespace vescale {
using detail::describe_status;
using detail::restartable;
using detail::SignalForwarding;
using detail::supervise;
using detail::Supervision;
using detail::Worker;
using detail::write_all;

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
    print_flight_diagnosis(options.flight_folder);  // before the next attempt clears the dumps
    write_all(STDERR_FILENO,
              fmt::format("[launch] rank {} {}; restart {} of {} {}\n", w.rank,
                          describe_status(w.status), attempt + 1, options.max_restarts, from));
  }
}

}  // namespace vescale
