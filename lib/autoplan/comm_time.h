// `plan auto`'s communication time (NOTE [Plan auto]): every collective and transfer of a step on
// the busiest rank, at the fitted latency and bandwidth, none hidden behind compute.
#pragma once

#include "autoplan/machine_facts.h"
#include "autoplan/step_shape.h"

namespace vescale::autoplan {

/// Communication on the busiest rank per step: tp's activations, the replicas' (dp x cp)
/// gradients, cp's ring, pp's transfers and the few small all-reduces every step makes.
double comm_time(const Shape& s, const StateMemory& mine, double blocks, const MachineFacts& facts);

}  // namespace vescale::autoplan
