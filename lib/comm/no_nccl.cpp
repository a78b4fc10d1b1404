// The NCCL interface of a build without NCCL (NOTE [No-NCCL stub]): CPU LibTorch, Gloo only.
#include "comm/group.h"
#include "comm/nccl_backend.h"
#include "core/error.h"

namespace vescale::comm {

bool nccl_available() {
  return false;
}

std::string nccl_version() {
  return "";
}

namespace detail {

c10::intrusive_ptr<BackendBase> make_nccl_process_group(const c10::intrusive_ptr<::c10d::Store>&,
                                                        int, int, std::chrono::milliseconds) {
  throw UserError(
      "[comm] this build has no NCCL: backend 'nccl' needs a CUDA LibTorch build; this one is "
      "CPU-only: use comm.backend = \"gloo\"");
}

}  // namespace detail
}  // namespace vescale::comm
