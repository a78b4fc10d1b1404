// The c10d backends a group runs on (comm.backend), apart from group.h so that the job config can
// name them without the group's headers.
#pragma once

#include <string>

#include "core/device.h"
#include "core/enum_names.h"

namespace vescale::comm {

enum class Backend { kAuto, kGloo, kNccl };

/// Backend <-> "auto", "gloo", "nccl".
const EnumNames<Backend>& backend_names();
const char* backend_name(Backend backend);
/// Parses "auto", "gloo" or "nccl"; throws UserError otherwise.
Backend parse_backend(const std::string& text);
/// True when this build can create NCCL groups (CUDA LibTorch with NCCL and a visible GPU).
bool nccl_available();
/// The NCCL version this build runs ("2.22.3"), or "" for a build without NCCL.
std::string nccl_version();
/// The backend of a group whose tensors live on `device`, where `shared_gpu` says the node's ranks
/// share GPUs (NOTE [Ranks sharing a GPU]): kAuto is NCCL on CUDA, Gloo on the CPU and on shared
/// GPUs. Gloo takes CUDA tensors through host memory (NOTE [Gloo with CUDA tensors]). Throws
/// UserError for NCCL on shared GPUs, in a build without it, or off CUDA.
Backend resolve_backend(Backend requested, Device device, bool shared_gpu = false);

}  // namespace vescale::comm
