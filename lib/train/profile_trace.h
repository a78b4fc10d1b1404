// `train --profile FIRST-LAST`: a Chrome trace of the steps named (NOTE [Profile trace]).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/group.h"
#include "core/device.h"
#include "train/gpu_activity.h"
#include "train/step_trace.h"

namespace vescale {

/// Steps FIRST to LAST, as the metrics lines number them (from 1); empty when last < first.
struct StepRange {
  int64_t first = 1, last = 0;

  bool empty() const { return last < first; }
  bool contains(int64_t step) const { return step >= first && step <= last; }
  /// "2-3" or "5"; throws UserError naming `option` otherwise.
  static StepRange parse(const std::string& text, const std::string& option);
};

/// Records the profiled steps of a run and writes their trace.
class Profiler {
 public:
  /// Writes to `path` (on rank 0) the steps `range` of the run, as `trace` marks their phases and
  /// the recorder keeps their calls; on a GPU `device`, also the GPU's kernels, copies and memsets
  /// (NOTE [GPU activity]).
  Profiler(StepRange range, StepTrace& trace, const comm::Group& world, std::string path,
           Device device = kCpu);

  /// Step `step` (from 1) starts now.
  void start_step(int64_t step);
  /// Step `step` ended now (its metrics line written). After the last profiled one, writes the
  /// trace: *collective* over the world group then, as every rank runs the same steps.
  void end_step(int64_t step);
  /// Writes the trace if steps were recorded and it is not written yet (the run stopped inside
  /// the range). *Collective* over the world group.
  void finish();

 private:
  void write();
  /// Stops the GPU recording, if it runs, and keeps what it recorded.
  void stop_gpu_activity();

  StepRange range_;
  StepTrace& trace_;
  comm::Group world_;
  std::string path_;
  Device device_;
  GpuActivity gpu_;
  bool gpu_tried_ = false;  ///< GPU recording was started (or failed to) at the first step seen
  std::vector<GpuActivityEvent> gpu_events_;
  uint64_t calls_before_ = 0;  ///< the recorder's last call id when the step started
  double step_start_s_ = 0;
  std::vector<PhaseSpan> steps_;  ///< one span per profiled step
  std::vector<PhaseSpan> phases_;
  std::vector<comm::FlightEntry> calls_;
  std::vector<std::string> group_names_;  ///< the recorder's groups, by index
  int64_t dropped_ = 0;  ///< calls the recorder's ring no longer held at the step's end
  bool written_ = false;
};

}  // namespace vescale
