#include "autoplan/muon_cost.h"

#include "autoplan/comm_time.h"
#include "config/dtype_policy.h"
#include "optim/muon_exchange.h"
#include "parallel/zero/dp_pieces.h"
#include "train/muon_params.h"

namespace vescale::autoplan {

std::vector<MuonCost> muon_cost_by_rank(const JobConfig& c, const LayoutModel& lm) {
  if (c.optimizer != OptimizerKind::kMuon) return {};
  std::vector<MuonCost> out(c.pp);
  const auto element_bytes = static_cast<int64_t>(c10::elementSize(state_dtype(c)));
  for (int64_t r = 0; r < c.pp; ++r) {
    std::vector<int64_t> coordinate(lm.job.mesh().ndim(), 0);
    coordinate[lm.job.mesh().dim_index("pp")] = r;
    const JobMesh job = JobMesh::layout(c.mesh_dims(), lm.job.mesh().rank_at(coordinate));
    std::vector<DTensorSpec> specs;
    for (size_t s = 0; s < lm.pipe.stages.size(); ++s) {
      if (lm.pipe.schedule.stage_rank[s] != r) continue;
      for (const auto& p : lm.plan.parameters) {
        if (!under_modules(p.fqn, lm.pipe.modules[s]) || !takes_muon(c, p.fqn, p.shape.size()))
          continue;
        if (!holds_parameter(lm, job, p.fqn)) continue;
        const bool is_expert = lm.experts.count(p.fqn) > 0;
        DTensorSpec spec = DTensorSpec(job.param_mesh(), p.placements, p.shape).on_mesh(job.mesh());
        if (c.zero > 0)
          spec = dp_piece_spec(spec, job.param_dims(shard_flags(p.placements), is_expert).averaged);
        specs.push_back(std::move(spec));
      }
    }
    MuonCost& cost = out[r];
    cost.matrices = static_cast<int64_t>(specs.size());
    const MuonExchange exchange(std::move(specs), c.ns_steps);
    cost.sent_bytes = exchange.sent_bytes(element_bytes);
    cost.calls = exchange.all_to_alls();
    cost.owned_flops = exchange.owned_flops();
    for (int64_t j = 0; j < cost.matrices; ++j)
      cost.owned += exchange.owns(static_cast<size_t>(j)) ? 1 : 0;
  }
  return out;
}

double muon_comm_time(const MuonCost& cost, const DeviceMesh& mesh, const MachineFacts& facts) {
  double seconds = 0;
  for (const auto& [dim, calls] : cost.calls) {
    const auto sent = cost.sent_bytes.find(dim);
    const double bytes = sent == cost.sent_bytes.end() ? 0.0 : static_cast<double>(sent->second);
    seconds += static_cast<double>(calls) *
               all_to_all_fit(facts, mesh.size(dim)).time(bytes / static_cast<double>(calls));
  }
  return seconds;
}

double muon_compute_time(const MuonCost& cost, int64_t ns_steps, const ComputeFacts& facts) {
  if (cost.owned == 0) return 0.0;
  // Three products an iteration, each a part of the matrix's FLOPs.
  const double products = 3.0 * static_cast<double>(ns_steps * cost.owned);
  return cost.owned_flops / facts.gemm_rate(cost.owned_flops / products);
}

}  // namespace vescale::autoplan
