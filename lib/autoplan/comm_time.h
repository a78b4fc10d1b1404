// `plan auto`'s communication time (NOTE [Plan auto]): every collective and transfer of a step on
// the busiest rank, at the fitted latency and bandwidth, none hidden behind compute.
#pragma once

#include "autoplan/machine_facts.h"
#include "autoplan/step_shape.h"

namespace vescale::autoplan {

/// Communication on the busiest rank per step, by what sends it, in seconds.
struct CommTimes {
  double tp = 0;     ///< tp's activations around attention and MLP
  double dp = 0;     ///< the replicas' gradients (dp x cp; an expert's dp x cp / ep) under ZeRO
  double cp = 0;     ///< cp's ring of keys and values
  double pp = 0;     ///< pp's activations and their gradients
  double ep = 0;     ///< ep's all-to-alls of routed tokens (NOTE [Expert parallelism])
  double muon = 0;   ///< Muon's exchanges of its matrices' pieces (NOTE [Muon exchange])
  double steps = 0;  ///< the few small all-reduces every step makes
  double total() const { return tp + dp + cp + pp + ep + muon + steps; }
};

/// Communication on the busiest rank per step: tp's activations, the replicas' (dp x cp)
/// gradients, cp's ring, pp's transfers, ep's all-to-alls and the few small all-reduces every
/// step makes. `blocks`: the busiest rank's transformer blocks.
CommTimes comm_times(const Shape& s, const StateMemory& mine, double blocks,
                     const MachineFacts& facts);

/// The fit an all-to-all over `ep` ranks is priced at: the calibration's all_to_all figures, or
/// for a calibration without them its all_gather's over the same group, which moves as much of
/// its buffer ((n - 1) / n) per rank.
const CommFit& all_to_all_fit(const MachineFacts& facts, int64_t ep);

}  // namespace vescale::autoplan
