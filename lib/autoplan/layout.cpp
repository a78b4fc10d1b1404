#include "autoplan/layout.h"

#include <fmt/format.h>

#include <array>

#include "core/error.h"
#include "dmodule/parallelize.h"
#include "dmodule/plan.h"
#include "mesh/job_mesh.h"
#include "parallel/pipeline/schedule.h"
#include "train/job.h"
#include "train/model_factory.h"
#include "train/preflight.h"
#include "train/task.h"

namespace vescale::autoplan {

std::vector<std::string> Layout::overrides() const {
  return {fmt::format("parallel.pp={}", pp),
          fmt::format("parallel.dp={}", dp),
          fmt::format("parallel.ep={}", ep),
          fmt::format("parallel.cp={}", cp),
          fmt::format("parallel.tp={}", tp),
          fmt::format("parallel.zero={}", zero),
          fmt::format("parallel.microbatches={}", microbatches),
          fmt::format("parallel.pp_schedule=\"{}\"", schedule),
          fmt::format("parallel.pp_virtual={}", virtual_stages),
          "parallel.pp_split=[\"balanced\"]",
          fmt::format("parallel.plan=\"{}\"", plan),
          fmt::format("training.activation_checkpoint=\"{}\"", config_name(recompute))};
}

std::string Layout::str() const {
  std::string out = fmt::format(
      "pp={} dp={}{}{} tp={}{} zero={} mb={}", pp, dp, ep > 1 ? fmt::format(" ep={}", ep) : "",
      cp > 1 ? fmt::format(" cp={}", cp) : "", tp, sp ? " sp" : "", zero, microbatches);
  if (pp > 1) out += fmt::format(" {}", schedule);
  if (pp > 1 && virtual_stages > 1) out += fmt::format(" v={}", virtual_stages);
  if (recompute != Recompute::kNone) out += fmt::format(" ac={}", config_name(recompute));
  return out;
}

JobConfig layout_config(const JobConfig& base, const Layout& layout) {
  return JobConfig::parse(base.text, base.source, layout.overrides());
}

namespace {

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

/// True when the plan shards some parameter over a 1-D tp mesh (its rules have one placement
/// each: a plan for a 2-D tp mesh does not apply to the layouts here).
bool shards_over_one_dim(const Plan& plan) {
  bool shards = false;
  for (const auto& rule : plan.parameter) {
    if (rule.placements.size() != 1) return false;
    shards = shards || rule.placements[0].is_shard();
  }
  return shards;
}

/// The zoo plans of `model` that shard parameters over a 1-D tp mesh, each with whether it is
/// the sequence-parallel variant.
std::vector<std::pair<std::string, bool>> tp_plans(const std::string& model) {
  std::vector<std::pair<std::string, bool>> out;
  for (const auto& name : plan_zoo_names()) {
    const Plan plan = Plan::load(name);
    if (plan.model != model || !shards_over_one_dim(plan)) continue;
    out.emplace_back(name, name.size() > 3 && name.compare(name.size() - 3, 3, "-sp") == 0);
  }
  return out;
}

/// The ways `nproc` ranks split into pp x cp x tp (dp the rest), cp only where `base`'s sequences
/// split into 2 cp chunks of a transformer's.
std::vector<std::array<int64_t, 3>> meshes(const JobConfig& base, int64_t nproc) {
  const bool splits_sequences = base.family().transformer_shape(base.model_spec()).has_value();
  std::vector<std::array<int64_t, 3>> out;
  for (int64_t pp : divisors(nproc)) {
    for (int64_t cp : divisors(nproc / pp)) {
      if (cp > 1 && (!splits_sequences || base.seq_len % (2 * cp) != 0)) continue;
      for (int64_t tp : divisors(nproc / pp / cp))
        out.push_back({pp, cp, tp});
    }
  }
  return out;
}

/// The ep degrees of `data_ranks` (dp x cp) for `base`'s model: their divisors that divide a
/// mixture of experts' experts per layer (1 included); 1 alone for a dense model.
std::vector<int64_t> expert_degrees(const JobConfig& base, int64_t data_ranks) {
  const int64_t experts = base.family().experts_per_layer(base.model_spec());
  std::vector<int64_t> out;
  for (int64_t ep : divisors(data_ranks))
    if (ep == 1 || (experts > 0 && experts % ep == 0)) out.push_back(ep);
  return out;
}

}  // namespace

Enumeration enumerate_layouts(const JobConfig& base, int64_t nproc) {
  VS_USER_CHECK(nproc >= 1, "plan auto: --nproc must be at least 1, not {}", nproc);
  Enumeration out;
  const auto plans = tp_plans(base.model);
  for (const auto& [pp, cp, tp] : meshes(base, nproc)) {
    const int64_t dp = nproc / pp / cp / tp;
    std::vector<std::pair<std::string, bool>> layout_plans = {{"", false}};
    if (tp > 1) layout_plans = plans;
    for (const int64_t ep : expert_degrees(base, dp * cp)) {
      for (const auto& [plan, sp] : layout_plans) {
        // ZeRO shards over the replicas, dp x cp.
        for (int64_t zero = 0; zero <= (dp * cp > 1 ? 3 : 0); ++zero) {
          if (base.global_batch_size % dp != 0) {
            ++out.considered;
            out.rejected.push_back(
                fmt::format("dp={}: training.global_batch_size = {} is not divisible by it", dp,
                            base.global_batch_size));
            continue;
          }
          for (int64_t mb : divisors(base.global_batch_size / dp)) {
            std::vector<std::pair<std::string, int64_t>> schedules = {{"1f1b", 1}};
            if (pp > 1) {
              schedules.clear();
              for (const auto& name : pipeline::schedule_names())
                for (int64_t v : {1, 2})
                  schedules.emplace_back(name, v);
            }
            for (const auto& [schedule, v] : schedules) {
              Layout l{pp, dp, tp, sp, zero, mb, schedule, v, plan, base.activation_checkpoint,
                       cp, ep};
              ++out.considered;
              try {
                check_layout(layout_config(base, l));
                out.valid.push_back(l);
              } catch (const UserError& e) {
                out.rejected.push_back(l.str() + ": " + e.what());
              }
            }
          }
        }
      }
    }
  }
  return out;
}

}  // namespace vescale::autoplan
