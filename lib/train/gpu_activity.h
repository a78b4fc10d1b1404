// The GPU's own work (kernels, copies, memsets) during profiled steps, recorded by LibTorch's
// Kineto profiler, for `train --profile` (NOTE [Profile trace] in step_trace.h).
//
// NOTE [GPU activity]: only the CUDA activities are asked for (no CPU operators: the trace
// already has the step's phases and calls, and recording every operator would slow the host side
// it measures). Kineto's clock is not this program's: the events are placed relative to the trace
// start Kineto reports, which is when start() enabled it. CMakeLists.txt compiles gpu_activity.cpp
// on CUDA builds and no_gpu_activity.cpp on CPU builds (as NOTE [No-NCCL stub]).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace vescale {

struct GpuActivityEvent {
  std::string name;               ///< the kernel's (demangled) name, or "Memcpy DtoH", ...
  std::string category;           ///< "kernel", "gpu_memcpy" or "gpu_memset"
  int64_t stream = 0;             ///< the CUDA stream it ran on
  double start_s = 0, end_s = 0;  ///< on the clock of start()'s `now_s`
};

/// Records the GPU's activity between start() and stop() (one span at a time).
class GpuActivity {
 public:
  /// Whether this build can record it (a CUDA LibTorch with Kineto).
  static bool built();
  /// Starts recording; `clock_s` reads the caller's clock (seconds), which the events will be
  /// placed on: read right after Kineto started, when its trace begins.
  void start(const std::function<double()>& clock_s);
  /// Waits for the GPU's queued work, stops recording and returns what ran since start().
  std::vector<GpuActivityEvent> stop();
  bool recording() const { return recording_; }

 private:
  bool recording_ = false;
  double start_s_ = 0;
};

}  // namespace vescale
