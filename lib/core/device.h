// The device a rank computes on: the CPU, or the GPU cuda:LOCAL_RANK (docs/design.md §16). It flows
// from the job to every tensor factory in comm/, dtensor/, models/ and data/.
#pragma once

#include <c10/core/Device.h>

#include <string>

#include "core/enum_names.h"

namespace vescale {

using Device = c10::Device;

/// The CPU: the default wherever a Device may be left out.
inline const Device kCpu{c10::kCPU};

/// GPUs this process sees: 0 when LibTorch has no CUDA or the machine has no GPU.
int cuda_device_count();
/// The CUDA runtime version LibTorch was built with ("12.4"), or "" for a CPU build.
std::string cuda_build_version();

/// Where a rank computes, as training.device and --device flags name it.
enum class DeviceSetting { kAuto, kCpu, kCuda };
/// DeviceSetting <-> "auto", "cpu", "cuda".
const EnumNames<DeviceSetting>& device_setting_names();

/// Resolves training.device for the rank with `local_rank` of a node's `local_ranks`, given `gpus`
/// visible GPUs: kCpu; kCuda (cuda:local_rank, or cuda:(local_rank mod gpus) where the node has
/// more local ranks than GPUs: NOTE [Ranks sharing a GPU]); kAuto (the same when there is a GPU,
/// else cpu). Throws UserError for kCuda without a GPU, a negative local rank, and a local rank
/// past the GPUs of a node that says it runs no more ranks than GPUs (a launcher's
/// LOCAL_WORLD_SIZE missing or wrong: sharing is never guessed).
Device resolve_device(DeviceSetting setting, int local_rank, int gpus, int local_ranks = 1);
/// The same for a setting's name; UserError naming the settings for another name.
Device resolve_device(const std::string& setting, int local_rank, int gpus, int local_ranks = 1);
/// Whether `local_ranks` ranks of a node with `gpus` GPUs share GPUs under `setting` (it resolves
/// to CUDA and there are more ranks than GPUs).
bool shares_gpus(DeviceSetting setting, int local_ranks, int gpus);
/// The one warning line of a node whose ranks share GPUs: "[device] 4 local ranks share 1 GPU:
/// local rank r computes on cuda:(r mod 1) ...".
std::string gpu_sharing_warning(int local_ranks, int gpus);
/// resolve_device with the GPUs this process sees.
Device parse_device(DeviceSetting setting, int local_rank, int local_ranks = 1);
Device parse_device(const std::string& setting, int local_rank, int local_ranks = 1);
/// Makes `device` the current CUDA device of the calling thread (libraries that allocate on "the
/// current device", NCCL's barrier among them, then use the rank's GPU). Nothing for the CPU.
void bind_device(Device device);

}  // namespace vescale
