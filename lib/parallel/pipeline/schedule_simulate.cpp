#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <optional>

#include "core/error.h"
#include "parallel/pipeline/schedule.h"
#include "parallel/pipeline/schedule_events.h"
#include "parallel/pipeline/schedule_generators.h"

namespace vescale::pipeline {
namespace {

using detail::describe;
using detail::EventKey;
using detail::events_of;
using detail::needs_of;
using detail::produces_input_grad;

/// simulate()'s run of a schedule: the clocks, what has happened so far, and the result.
struct Simulator {
  const PipelineSchedule& s;
  int64_t f_cost, b_cost, i_cost, w_cost;
  Simulation sim;
  std::vector<int> stashed;
  std::vector<int64_t> clock;
  std::vector<size_t> next;
  std::map<EventKey, int64_t> done_at;

  Simulator(const PipelineSchedule& schedule, int64_t f, int64_t b)
      : s(schedule), f_cost(f), b_cost(b), i_cost(b / 2), w_cost(b - b / 2) {
    const int pp = s.pp;
    sim.busy.assign(pp, 0);
    sim.runs.assign(pp, {});
    sim.peak_stashed.assign(s.stages(), 0);
    stashed.assign(s.stages(), 0);
    clock.assign(pp, 0);
    next.assign(pp, 0);
  }

  int64_t cost(ActionKind k) const {
    switch (k) {
      case ActionKind::kForward:
        return f_cost;
      case ActionKind::kBackward:
        return b_cost;
      case ActionKind::kBackwardInput:
        return i_cost;
      case ActionKind::kBackwardWeight:
        return w_cost;
      default:
        return 0;
    }
  }

  /// When `a` can start on rank r (the rank free and every input there); nullopt while an input
  /// is missing.
  std::optional<int64_t> start_time(int r, const Action& a) const {
    int64_t start = clock[r];
    for (const auto& e : needs_of(a, s.stage_rank)) {
      auto it = done_at.find(e);
      if (it == done_at.end()) return std::nullopt;
      start = std::max(start, it->second);
    }
    return start;
  }

  /// Runs rank r's next actions, in order, as long as their inputs are there; true if any ran.
  bool run_rank(int r) {
    bool progress = false;
    while (next[r] < s.ranks[r].size()) {
      const Action& a = s.ranks[r][next[r]];
      const std::optional<int64_t> ready = start_time(r, a);
      if (!ready) break;
      const int64_t start = *ready;
      const int64_t end = start + cost(a.kind);
      for (const auto& e : events_of(a))
        done_at[e] = end;
      if (is_compute(a.kind)) {
        clock[r] = end;
        sim.busy[r] += end - start;
        sim.runs[r].push_back({a, start, end});
      }
      if (a.kind == ActionKind::kForward)
        sim.peak_stashed[a.stage] = std::max(sim.peak_stashed[a.stage], ++stashed[a.stage]);
      if (produces_input_grad(a.kind)) --stashed[a.stage];
      ++next[r];
      progress = true;
    }
    return progress;
  }

  /// The makespan, and whether every rank finished: if not, each stuck rank's next action and
  /// what it waits for.
  void find_stuck() {
    sim.deadlock_free = true;
    for (int r = 0; r < s.pp; ++r) {
      sim.makespan = std::max(sim.makespan, clock[r]);
      if (next[r] == s.ranks[r].size()) continue;
      sim.deadlock_free = false;
      const Action& a = s.ranks[r][next[r]];
      std::vector<std::string> missing;
      for (const auto& e : needs_of(a, s.stage_rank))
        if (!done_at.count(e)) missing.push_back(describe(e, s.stage_rank));
      sim.stuck.push_back(
          fmt::format("rank {}: {} waits for {}", r, to_string(a), fmt::join(missing, " and ")));
    }
  }

  /// idle / (pp · makespan).
  void measure_bubble() {
    int64_t busy = 0;
    for (int64_t b : sim.busy)
      busy += b;
    const double area = static_cast<double>(s.pp) * static_cast<double>(sim.makespan);
    sim.bubble = area > 0 ? (area - static_cast<double>(busy)) / area : 0.0;
  }
};

}  // namespace

Simulation simulate(const PipelineSchedule& s, int64_t f_cost, int64_t b_cost) {
  Simulator run(s, f_cost, b_cost);
  // Times follow from the data flow alone, so any order of running ready actions gives them.
  bool progress = true;
  while (progress) {
    progress = false;
    for (int r = 0; r < s.pp; ++r)
      progress = run.run_rank(r) || progress;
  }
  run.find_stuck();
  run.measure_bubble();
  return std::move(run.sim);
}

double analytic_bubble(const std::string& name, int pp, int virtual_stages, int microbatches) {
  const detail::ScheduleKind* kind = detail::find_schedule_kind(name);
  VS_USER_CHECK(kind != nullptr, "[pipeline] no bubble formula for schedule '{}'", name);
  return kind->bubble(pp, virtual_stages, microbatches);
}

std::string bubble_formula(const std::string& name) {
  const detail::ScheduleKind* kind = detail::find_schedule_kind(name);
  return kind != nullptr ? kind->bubble_formula : "";
}

}  // namespace vescale::pipeline
