// What Muon's exchange costs a layout (NOTE [Muon exchange]), from its specs alone: the bytes
// plan lint shows and plan auto prices, and the Newton-Schulz work of each pipeline rank.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "autoplan/layout_model.h"
#include "autoplan/machine_facts.h"

namespace vescale::autoplan {

/// Muon's step on the first rank of one pipeline rank (coordinate 0 on every other dim).
struct MuonCost {
  int64_t matrices = 0;                       ///< the matrices whose pieces it holds
  std::map<std::string, int64_t> sent_bytes;  ///< what its exchanges send, by mesh dim
  std::map<std::string, int64_t> calls;       ///< its exchanges' all-to-alls, by mesh dim
  int64_t owned = 0;                          ///< the matrices it orthogonalizes
  double owned_flops = 0;                     ///< their Newton-Schulz FLOPs
};

/// One entry per pp rank; empty unless optimizer.name = "muon".
std::vector<MuonCost> muon_cost_by_rank(const JobConfig& c, const LayoutModel& lm);

/// Seconds of `cost`'s all-to-alls at the fitted all-to-all of each dim's size in `mesh`.
double muon_comm_time(const MuonCost& cost, const DeviceMesh& mesh, const MachineFacts& facts);

/// Seconds of `cost`'s Newton-Schulz at the matmul rate of its matrices' products.
double muon_compute_time(const MuonCost& cost, int64_t ns_steps, const ComputeFacts& facts);

}  // namespace vescale::autoplan
