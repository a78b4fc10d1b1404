// What nvcc built (NOTE [CUDA kernels]), for --version.
#include <string>

#include "kernels/cuda_kernels.h"

#ifndef VESCALE_CUDA_ARCHITECTURES
#error "CMake passes VESCALE_CUDA_ARCHITECTURES"
#endif

namespace vescale::cuda_kernels {

std::string build_text() {
  return "built by nvcc " + std::to_string(__CUDACC_VER_MAJOR__) + "." +
         std::to_string(__CUDACC_VER_MINOR__) + " for " VESCALE_CUDA_ARCHITECTURES;
}

}  // namespace vescale::cuda_kernels
