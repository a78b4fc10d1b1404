// NOTE [No-NCCL stub]
// The NCCL-specific code of comm/ sits behind this small interface, as MLX's backends do.
// CMakeLists.txt compiles nccl_backend.cpp on CUDA builds (LibTorch with ProcessGroupNCCL) and
// no_nccl.cpp on CPU builds, so no file is #ifdef'd out and each build compiles every file it
// lists. Internal to comm/.
#pragma once

#include <chrono>

#include "comm/c10d_compat.h"

namespace vescale::comm::detail {

/// A ProcessGroupNCCL of `size` ranks over `store`. A build without NCCL throws UserError.
/// *Collective* over the `size` ranks.
c10::intrusive_ptr<BackendBase> make_nccl_process_group(
    const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout);

}  // namespace vescale::comm::detail
