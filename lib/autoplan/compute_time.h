// `plan auto`'s compute time (NOTE [Plan auto]): a block's and each pipeline stage's forward and
// backward of one micro-batch, and the optimizer's pass, from the machine's measured rates.
#pragma once

#include <vector>

#include "autoplan/machine_facts.h"
#include "autoplan/step_shape.h"

namespace vescale::autoplan {

/// Each pipeline stage's forward + backward of one micro-batch, and its blocks.
struct StageTimes {
  std::vector<double> seconds, blocks;
};

StageTimes stage_times(const Shape& s, const MachineFacts& facts);

/// The optimizer: elementwise passes over the busiest rank's state (AdamW reads parameter,
/// gradient and two moments and writes three: 7 passes, plus the clip's one over the gradients).
double optimizer_time(const Shape& s, const StateMemory& mine, const ComputeFacts& f);

}  // namespace vescale::autoplan
