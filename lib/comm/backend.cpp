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

Backend resolve_backend(Backend requested, Device device) {
  if (requested == Backend::kAuto) return device.is_cuda() ? Backend::kNccl : Backend::kGloo;
  if (requested == Backend::kNccl) {
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
  VS_USER_CHECK(requested != Backend::kGloo || !device.is_cuda(),
                "[comm] comm.backend = 'gloo' moves CPU tensors only, but this rank computes on "
                "{}: use comm.backend = 'nccl' or 'auto', or training.device = 'cpu'",
                device.str());
  return requested;
}

}  // namespace vescale::comm
