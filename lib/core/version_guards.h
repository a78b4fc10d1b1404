// NOTE [Version guards]
// The one place that tells library versions apart. vescale-train builds against
//   - Debian 12: LibTorch 1.13 (CPU), HDF5 1.10, GCC 12 (the build machine, scripts/test.sh);
//   - the PyTorch 2.11 wheel from PyPI, with CUDA 13.0 and NCCL 2.28 (the GPU machines', and CI's
//     wheel check, scripts/test-wheel.sh), HDF5 1.10 from Debian 12's packages, GCC 12 or 13;
//   - official LibTorch 2.x builds with CUDA and NCCL (users' GPU clusters);
//   - the newest PyTorch wheel on PyPI (2.15), compiled but not linked
//   (scripts/check-newest-torch.sh).
// Each macro below names one API that differs and the version that changed it. Code tests these
// macros, never TORCH_VERSION_* or H5_VERS_* directly, and an API that is the same everywhere gets
// no guard. (Which backend a build has, CUDA and NCCL or CPU only, is CMake's choice of files,
// NOTE [No-NCCL stub], not a guard.)
#pragma once

#include <H5public.h>
#include <torch/version.h>

#define VESCALE_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||          \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

// ---- LibTorch ----------------------------------------------------------------------------------

/// c10d's process groups derive from c10d::Backend (2.0); in 1.13 from c10d::ProcessGroup.
#define VESCALE_C10D_HAS_BACKEND VESCALE_TORCH_AT_LEAST(2, 0)
/// TCPStoreOptions::useLibUV (2.1; true by default from 2.4, which a build without libuv refuses).
#define VESCALE_TCPSTORE_HAS_LIBUV_OPTION VESCALE_TORCH_AT_LEAST(2, 1)
/// c10::Allocator::allocate is not const, and copy_data is pure virtual (2.3, with copy-on-write
/// storages); in 1.13 allocate is const and there is no copy_data.
#define VESCALE_ALLOCATOR_HAS_COPY_DATA VESCALE_TORCH_AT_LEAST(2, 3)
/// at::scaled_dot_product_attention with is_causal (2.0).
#define VESCALE_HAS_FUSED_ATTENTION VESCALE_TORCH_AT_LEAST(2, 0)
/// at::_fused_adamw_ with a float learning rate (2.1).
#define VESCALE_HAS_FUSED_ADAMW VESCALE_TORCH_AT_LEAST(2, 1)
/// Context::setFloat32MatmulPrecision (1.12; compiled on every build).
#define VESCALE_HAS_TF32_CONTROL VESCALE_TORCH_AT_LEAST(1, 12)
/// torch::autograd::Node is a c10::intrusive_ptr_target, made by c10::make_intrusive, with no
/// deleteNode (2.13); before, a std::shared_ptr with deleteNode (NOTE [Autograd nodes]).
#define VESCALE_AUTOGRAD_NODES_ARE_INTRUSIVE VESCALE_TORCH_AT_LEAST(2, 13)
// Our own CUDA kernels (NOTE [CUDA kernels]): CMake defines it on the vescale target, 1 where nvcc
// built lib/kernels/cuda.
#ifndef VESCALE_HAS_CUDA_KERNELS
#define VESCALE_HAS_CUDA_KERNELS 0
#endif

// ---- HDF5 --------------------------------------------------------------------------------------

/// H5Ovisit3 and H5O_info2_t (1.12); 1.14's default API maps H5Ovisit to it, with a `fields`
/// argument that 1.10's H5Ovisit lacks.
#define VESCALE_HDF5_HAS_OVISIT3 H5_VERSION_GE(1, 12, 0)
