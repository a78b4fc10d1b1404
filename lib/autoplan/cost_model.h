// `plan auto`'s cost model (NOTE [Plan auto]): a layout's step time and memory per rank, from
// the machine's measured facts and the model's analytic FLOPs, bytes and pipeline bubble.
#pragma once

#include <string>
#include <vector>

#include "autoplan/comm_time.h"
#include "autoplan/layout.h"
#include "autoplan/layout_model.h"
#include "autoplan/machine_facts.h"
#include "config/job_config.h"

namespace vescale::autoplan {

struct Prediction {
  Layout layout;
  // Seconds per step on the busiest rank.
  double compute_s = 0;  ///< forward + backward + optimizer work
  double comm_s = 0;     ///< collectives and transfers, none hidden behind compute
  CommTimes comm;        ///< comm_s by what sends it
  double bubble_s = 0;   ///< pipeline idle time
  double bubble = 0;     ///< the schedule's simulated bubble fraction
  double step_s() const { return compute_s + comm_s + bubble_s; }
  // Bytes per rank, the rank with the most.
  StateMemory state;
  double activations = 0;  ///< saved for backward, at the schedule's peak of micro-batches
  double memory() const { return state.total() + activations; }
  bool fits = true;
};

/// Predicts `layout` (with `config` = layout_config(base, layout)) on `facts`.
Prediction predict(const JobConfig& config, const Layout& layout, const MachineFacts& facts);

/// predict(layout_config(base, layout)) with whether it fits in `memory_bytes` per rank. A layout
/// that keeps every activation and does not fit is priced again recomputing (selective, then
/// full) and comes back with the first of those that fits, else as it was.
Prediction predict_fitting(const JobConfig& base, const Layout& layout, const MachineFacts& facts,
                           double memory_bytes);

/// The model's assumptions, for --explain.
std::string explain_model(const JobConfig& base, const MachineFacts& facts);

}  // namespace vescale::autoplan
