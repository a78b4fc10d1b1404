// NOTE [LibTorch versions]
// c10d changed shape between LibTorch 1.13 (Debian, CPU; compiled and tested here) and 2.x
// (CUDA builds): in 2.x ProcessGroupGloo/NCCL derive from c10d::Backend, in 1.13 from
// c10d::ProcessGroup. This header is comm/'s one view of that (the guards themselves are in
// core/version_guards.h, NOTE [Version guards]). Internal to comm/.
#pragma once

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "comm/store.h"
#include "core/version_guards.h"

namespace vescale::comm::detail {

#if VESCALE_C10D_HAS_BACKEND
using BackendBase = ::c10d::Backend;
#else
using BackendBase = ::c10d::ProcessGroup;
#endif

}  // namespace vescale::comm::detail

namespace vescale::comm {

struct Store::Impl {
  c10::intrusive_ptr<::c10d::Store> store;
};

}  // namespace vescale::comm
