// The schedules make_schedule knows, as one table: for each name, where its stages live, what it
// needs of pp, parallel.pp_virtual and the micro-batches, how its compute orders are generated,
// and the bubble theory gives it (NOTE [Analytic bubbles]). make_schedule, schedule_names,
// analytic_bubble and bubble_formula all read it. Internal to parallel/pipeline/.
#pragma once

#include <string>
#include <vector>

#include "parallel/pipeline/schedule.h"
#include "parallel/pipeline/schedule_events.h"

namespace vescale::pipeline::detail {

/// What a schedule needs of the micro-batch count besides at least 1.
enum class MicroBatchRule { kAny, kAtLeastPp, kMultipleOfPp };

/// One schedule of the table.
struct ScheduleKind {
  const char* name;
  StagePlacement placement;
  int min_virtual, max_virtual;  ///< the stages per rank it runs
  const char* virtual_need;      ///< them in words, for the error: "parallel.pp_virtual = 2 (...)"
  const char* virtual_hint;      ///< what to use instead, appended to that error ("" for none)
  MicroBatchRule micro_batches;
  /// The compute-only orders per rank: (pp, virtual stages, micro-batches) -> orders.
  Orders (*order)(int pp, int virtual_stages, int microbatches);
  /// The bubble fraction at F = 1, B = 2 (I = W = 1): (p, v, m) -> fraction.
  double (*bubble)(double p, double v, double m);
  const char* bubble_formula;  ///< `bubble` as text: "(p-1)/(m+p-1)"
};

/// Every schedule, in the order schedule_names() lists them.
const std::vector<ScheduleKind>& schedule_kinds();
/// The schedule called `name`, or nullptr.
const ScheduleKind* find_schedule_kind(const std::string& name);

}  // namespace vescale::pipeline::detail
