// The device a rank computes on: the CPU, or the GPU cuda:LOCAL_RANK (docs/design.md §16). It flows
// from the job to every tensor factory in comm/, dtensor/, models/ and data/.
#pragma once

#include <c10/core/Device.h>

#include <string>

namespace vescale {

using Device = c10::Device;

/// The CPU: the default wherever a Device may be left out.
inline const Device kCpu{c10::kCPU};

/// GPUs this process sees: 0 when LibTorch has no CUDA or the machine has no GPU.
int cuda_device_count();
/// The CUDA runtime version LibTorch was built with ("12.4"), or "" for a CPU build.
std::string cuda_build_version();

/// Resolves training.device for the rank with `local_rank`, given `gpus` visible GPUs: "cpu";
/// "cuda" (cuda:local_rank); "auto" (cuda:local_rank when there is a GPU, else cpu). Throws
/// UserError for other settings, and for "cuda" (or "auto" with GPUs) without a GPU for the rank.
Device resolve_device(const std::string& setting, int local_rank, int gpus);
/// resolve_device with the GPUs this process sees.
Device parse_device(const std::string& setting, int local_rank);
/// Makes `device` the current CUDA device of the calling thread (libraries that allocate on "the
/// current device", NCCL's barrier among them, then use the rank's GPU). Nothing for the CPU.
void bind_device(Device device);

}  // namespace vescale
