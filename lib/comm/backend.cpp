#include "comm/backend.h"

#include <fmt/format.h>

#include "core/error.h"

namespace vescale::comm {

const EnumNames<Backend>& backend_names() {
  static const EnumNames<Backend> names(
      "[comm] backend",
      {{Backend::kAuto, "auto"}, {Backend::kGloo, "gloo"}, {Backend::kNccl, "nccl"}});
  return names;
}

const char* backend_name(Backend backend) {
  return backend_names().name(backend);
}

Backend parse_backend(const std::string& text) {
  return backend_names().parse(text);
}

Backend resolve_backend(Backend requested, Device device, bool shared_gpu) {
  if (requested == Backend::kAuto)
    return device.is_cuda() && !shared_gpu ? Backend::kNccl : Backend::kGloo;
  if (requested == Backend::kNccl) {
    VS_USER_CHECK(!shared_gpu,
                  "[comm] comm.backend = 'nccl', but this node's ranks share GPUs (more local "
                  "ranks than GPUs) and NCCL takes one rank a GPU: set comm.backend = 'gloo' (or "
                  "'auto') to share them, or start at most one rank a GPU");
    VS_USER_CHECK(nccl_available(),
                  "[comm] comm.backend = 'nccl', but {}: use comm.backend = "
                  "'gloo' or 'auto'",
                  nccl_version().empty()
                      ? "this build has no NCCL (NCCL needs a CUDA LibTorch and a GPU)"
                      : fmt::format("this process sees no GPU (NCCL {} is built in; it needs one)",
                                    nccl_version()));
    VS_USER_CHECK(device.is_cuda(),
                  "[comm] comm.backend = 'nccl' moves CUDA tensors, but this rank computes on {}: "
                  "set training.device = 'cuda' (or 'auto'), or comm.backend = 'auto'",
                  device.str());
  }
  return requested;
}

}  // namespace vescale::comm
