#include "parallel/pipeline/schedule.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/error.h"
#include "core/suggest.h"
#include "parallel/pipeline/schedule_generators.h"

namespace vescale::pipeline {
namespace {

using detail::MicroBatchRule;
using detail::ScheduleKind;

/// Throws UserError unless `kind` runs `v` stages per rank and `m` micro-batches on `p` ranks,
/// saying what would work.
void check_supported(const ScheduleKind& kind, int p, int v, int m) {
  VS_USER_CHECK(v >= kind.min_virtual && v <= kind.max_virtual, "[pipeline] {} needs {}, got {}{}",
                kind.name, kind.virtual_need, v, kind.virtual_hint);
  VS_USER_CHECK(kind.micro_batches != MicroBatchRule::kAtLeastPp || m >= p,
                "[pipeline] {} needs at least pp = {} micro-batches, got {}", kind.name, p, m);
  VS_USER_CHECK(kind.micro_batches != MicroBatchRule::kMultipleOfPp || m % p == 0,
                "[pipeline] {} needs micro-batches divisible by pp = {}, got {}", kind.name, p, m);
}

}  // namespace

std::vector<int> place_stages(StagePlacement placement, int pp, int virtual_stages) {
  VS_CHECK(pp >= 1 && virtual_stages >= 1, "[pipeline] pp = {} and virtual stages = {}", pp,
           virtual_stages);
  VS_CHECK(placement == StagePlacement::kLoop || virtual_stages == 2,
           "[pipeline] a V placement holds 2 stages per rank, not {}", virtual_stages);
  std::vector<int> stage_rank(static_cast<size_t>(pp * virtual_stages));
  for (int s = 0; s < pp * virtual_stages; ++s)
    stage_rank[s] = placement == StagePlacement::kLoop || s < pp ? s % pp : 2 * pp - 1 - s;
  return stage_rank;
}

const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const ScheduleKind& kind : detail::schedule_kinds())
      out.push_back(kind.name);
    return out;
  }();
  return names;
}

PipelineSchedule make_schedule(const std::string& name, int pp, int virtual_stages,
                               int microbatches) {
  const ScheduleKind* kind = detail::find_schedule_kind(name);
  if (kind == nullptr) {
    const auto& names = schedule_names();
    throw UserError(fmt::format("[pipeline] unknown schedule '{}'{}; the schedules are {}", name,
                                did_you_mean(name, names), fmt::join(names, ", ")));
  }
  const int p = pp, v = virtual_stages, m = microbatches;
  VS_USER_CHECK(p >= 1 && v >= 1 && m >= 1,
                "[pipeline] {} needs pp, virtual stages and micro-batches of at least 1, got pp = "
                "{}, parallel.pp_virtual = {}, micro-batches = {}",
                name, p, v, m);
  check_supported(*kind, p, v, m);
  PipelineSchedule s;
  s.name = name;
  s.pp = p;
  s.virtual_stages = v;
  s.microbatches = m;
  s.stage_rank = place_stages(kind->placement, p, v);
  s.ranks = add_communication(kind->order(p, v, m), s.stage_rank);
  validate(s);
  return s;
}

}  // namespace vescale::pipeline
