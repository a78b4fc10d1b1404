// The CUDA build's GPU activity recorder (NOTE [GPU activity] in gpu_activity.h): LibTorch's
// Kineto profiler with the CUDA activities only.
#include "train/gpu_activity.h"

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>

#include <memory>
#include <set>
#include <string_view>

#include "core/error.h"

namespace vescale {
namespace {

namespace kineto = torch::autograd::profiler;
namespace profiler = torch::profiler::impl;

/// Chrome-trace categories as Kineto's own traces name them. By name: Kineto's activity type
/// numbers are not part of LibTorch's API.
std::string category_of(std::string_view name) {
  if (name.rfind("Memcpy", 0) == 0) return "gpu_memcpy";
  if (name.rfind("Memset", 0) == 0) return "gpu_memset";
  return "kernel";
}

}  // namespace

bool GpuActivity::built() {
  return true;
}

void GpuActivity::start(const std::function<double()>& clock_s) {
  VS_CHECK(!recording_, "[profile] GPU activity is already being recorded");
  const profiler::ProfilerConfig config(profiler::ProfilerState::KINETO);
  const std::set<profiler::ActivityType> activities{profiler::ActivityType::CUDA};
  kineto::prepareProfiler(config, activities);
  kineto::enableProfiler(config, activities);
  start_s_ = clock_s();
  recording_ = true;
}

std::vector<GpuActivityEvent> GpuActivity::stop() {
  if (!recording_) return {};
  recording_ = false;
  torch::cuda::synchronize();  // what the host queued has run, so Kineto has seen it
  const std::unique_ptr<kineto::ProfilerResult> result = kineto::disableProfiler();
  const uint64_t origin_ns = result->trace_start_ns();
  std::vector<GpuActivityEvent> events;
  for (const kineto::KinetoEvent& e : result->events()) {
    if (e.deviceType() != c10::DeviceType::CUDA) continue;
    GpuActivityEvent event;
    event.name = e.name();
    event.category = category_of(event.name);
    event.stream = e.deviceResourceId();
    // Both unsigned: an event that Kineto dates before the trace start comes out negative.
    event.start_s =
        start_s_ + (static_cast<double>(e.startNs()) - static_cast<double>(origin_ns)) * 1e-9;
    event.end_s = event.start_s + static_cast<double>(e.durationNs()) * 1e-9;
    events.push_back(std::move(event));
  }
  return events;
}

}  // namespace vescale
