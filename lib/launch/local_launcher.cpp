#include "launch/local_launcher.h"

#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
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
using detail::restartable_failure;
using detail::SignalForwarding;
using detail::supervise;
using detail::Supervision;
using detail::Worker;
using detail::write_all;

namespace {

/// NOTE [Elastic training]: the worker slots of an elastic launch, their failures, and the ranks
/// the next attempt runs on.
class ElasticSlots {
 public:
  explicit ElasticSlots(int nproc) : failures_(static_cast<size_t>(nproc), 0) {
    for (int i = 0; i < nproc; ++i)
      slots_.push_back(i);
  }
  /// Counts a failure of the slot that ran `rank`: "" while it has restarts left, else what
  /// dropping it says.
  std::string fail(int rank, int max_restarts) {
    const int slot = slots_.at(static_cast<size_t>(rank));
    const int count = ++failures_[static_cast<size_t>(slot)];
    if (count <= max_restarts) return "";
    slots_.erase(slots_.begin() + rank);
    lost_.push_back(slot);
    return fmt::format("its slot {} failed {} time{}, more than --max-restarts {}: dropped", slot,
                       count, count == 1 ? "" : "s", max_restarts);
  }
  int left() const { return static_cast<int>(slots_.size()); }
  std::string lost() const {
    return fmt::format("slot{} {}", lost_.size() == 1 ? "" : "s", fmt::join(lost_, ", "));
  }

 private:
  std::vector<int> slots_;  // the slot each rank of the next attempt runs on
  std::vector<int> failures_;
  std::vector<int> lost_;
};

}  // namespace

LaunchOutcome run_local_workers(const LocalLaunchOptions& options) {
  VS_CHECK(options.nproc >= 1, "[launch] need at least one worker, got {}", options.nproc);
  VS_CHECK(!options.argv.empty(), "[launch] no worker command");
  VS_CHECK(!options.elastic || options.world_for, "[launch] an elastic launch needs world_for");
  SignalForwarding forwarding;
  std::vector<std::string> argv = options.argv;
  LocalLaunchOptions attempt_options = options;
  ElasticSlots slots(options.nproc);
  for (int attempt = 0;; ++attempt) {
    // A fresh rendezvous folder each time.
    Supervision s = supervise(attempt_options, argv, attempt);
    s.outcome.restarts = attempt;
    s.outcome.world = attempt_options.nproc;
    std::string dropped;
    if (options.elastic) {
      if (!restartable_failure(s, options)) return s.outcome;
      dropped = slots.fail(s.outcome.failed_rank, options.max_restarts);
      const int world = dropped.empty() ? attempt_options.nproc : options.world_for(slots.left());
      if (world < std::max(1, options.min_ranks)) {
        s.outcome.failure += fmt::format(
            "; {}; the {} slot{} left give {}, fewer than --min-ranks {} (lost: {})", dropped,
            slots.left(), slots.left() == 1 ? "" : "s",
            world == 0 ? "no valid mesh"
                       : fmt::format("a mesh of {} rank{}", world, world == 1 ? "" : "s"),
            options.min_ranks, slots.lost());
        return s.outcome;
      }
      attempt_options.nproc = world;
    } else if (!restartable(s, options, attempt)) {
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
    if (options.elastic) {
      write_all(
          STDERR_FILENO,
          fmt::format("[launch] rank {} {}{}; restart {} on {} rank{}{} {}\n", w.rank,
                      describe_status(w.status), dropped.empty() ? "" : "; " + dropped, attempt + 1,
                      attempt_options.nproc, attempt_options.nproc == 1 ? "" : "s",
                      s.outcome.world == attempt_options.nproc
                          ? ""
                          : fmt::format(" (was {})", s.outcome.world),
                      from));
    } else {
      write_all(STDERR_FILENO,
                fmt::format("[launch] rank {} {}; restart {} of {} {}\n", w.rank,
                            describe_status(w.status), attempt + 1, options.max_restarts, from));
    }
  }
}

}  // namespace vescale
