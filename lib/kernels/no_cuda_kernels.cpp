// The stand-in for lib/kernels/cuda/*.cu in a build without nvcc (NOTE [CUDA kernels]).
#include "core/error.h"
#include "kernels/cuda_kernels.h"

namespace vescale::cuda_kernels {
namespace {

[[noreturn]] void absent() {
  throw Error("[kernels] this build has no CUDA kernels of its own (NOTE [CUDA kernels]): " +
              build_text());
}

}  // namespace

std::string build_text() {
  return "not built (a CPU LibTorch, no nvcc found, or VESCALE_CUDA_KERNELS=OFF)";
}

at::Tensor swiglu_forward(const at::Tensor&, const at::Tensor&) {
  absent();
}

std::pair<at::Tensor, at::Tensor> swiglu_backward(const at::Tensor&, const at::Tensor&,
                                                  const at::Tensor&) {
  absent();
}

at::Tensor rotary(const at::Tensor&, const at::Tensor&, const at::Tensor&, bool) {
  absent();
}

AddNorm add_norm_forward(bool, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                         const at::Tensor&, double) {
  absent();
}

AddNormGrads add_norm_backward(bool, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                               const at::Tensor&, const at::Tensor&, const at::Tensor&) {
  absent();
}

std::pair<at::Tensor, at::Tensor> lm_loss(const at::Tensor&, const at::Tensor&, double, bool) {
  absent();
}

at::Tensor grouped_mm(const at::Tensor&, const at::Tensor&, const std::vector<at::Tensor>&, bool) {
  absent();
}

at::Tensor grouped_weight_grads(const at::Tensor&, const at::Tensor&, const at::Tensor&) {
  absent();
}

}  // namespace vescale::cuda_kernels
