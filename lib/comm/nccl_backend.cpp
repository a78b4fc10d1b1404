// NCCL groups, for CUDA builds (NOTE [No-NCCL stub]).
//
// NOT COMPILED on this project's build machine, which has only Debian's CPU LibTorch 1.13 (no
// CUDA LibTorch, no GPU): written against the official LibTorch 2.x, where ProcessGroupNCCL
// derives from c10d::Backend (NOTE [LibTorch versions]). The CPU build compiles no_nccl.cpp.
#include "comm/nccl_backend.h"

#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include "comm/group.h"
#include "core/device.h"

namespace vescale::comm {

bool nccl_available() {
  return cuda_device_count() > 0;
}

std::string nccl_version() {
  return ::c10d::getNcclVersion();
}

namespace detail {

c10::intrusive_ptr<BackendBase> make_nccl_process_group(
    const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout) {
  auto options = ::c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return c10::make_intrusive<::c10d::ProcessGroupNCCL>(store, rank, size, options);
}

}  // namespace detail
}  // namespace vescale::comm
