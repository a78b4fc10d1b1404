// SwiGLU's product silu(gate) * up and its gradients, one pass each (NOTE [CUDA kernels]): ATen
// runs silu, the product, and in the backward silu's gradient and two products, each a kernel
// reading and writing [tokens, intermediate] tensors.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda_kernels.h"

namespace vescale::cuda_kernels {
namespace {

__device__ __forceinline__ float sigmoid(float x) {
  return 1.0f / (1.0f + expf(-x));
}

template <typename T>
__global__ void swiglu_forward_kernel(const T* __restrict__ gate, const T* __restrict__ up,
                                      T* __restrict__ out, int64_t n) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float g = static_cast<float>(gate[i]);
    out[i] = static_cast<T>(g * sigmoid(g) * static_cast<float>(up[i]));
  }
}

template <typename T>
__global__ void swiglu_backward_kernel(const T* __restrict__ grad, const T* __restrict__ gate,
                                       const T* __restrict__ up, T* __restrict__ d_gate,
                                       T* __restrict__ d_up, int64_t n) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float dy = static_cast<float>(grad[i]);
    const float g = static_cast<float>(gate[i]);
    const float s = sigmoid(g);
    d_up[i] = static_cast<T>(dy * g * s);
    d_gate[i] = static_cast<T>(dy * static_cast<float>(up[i]) * s * (1.0f + g * (1.0f - s)));
  }
}

void check_alike(const char* what, const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.is_cuda() && b.device() == a.device(), "[kernels] ", what,
              ": tensors on one CUDA device");
  TORCH_CHECK(a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type(), "[kernels] ", what,
              ": tensors of one shape and dtype");
  const at::ScalarType t = a.scalar_type();
  TORCH_CHECK(takes(t), "[kernels] ", what, ": float32, bfloat16 or float16, not ",
              c10::toString(t));
}

}  // namespace

at::Tensor swiglu_forward(const at::Tensor& gate_in, const at::Tensor& up_in) {
  check_alike("swiglu_forward", gate_in, up_in);
  const at::Tensor gate = gate_in.contiguous(), up = up_in.contiguous();
  const c10::cuda::CUDAGuard guard(gate.device());
  at::Tensor out = at::empty_like(gate);
  const int64_t n = gate.numel();
  if (n == 0) return out;
  by_dtype(gate.scalar_type(), [&](auto zero) {
    using T = decltype(zero);
    swiglu_forward_kernel<T><<<blocks_for(n), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        gate.data_ptr<T>(), up.data_ptr<T>(), out.data_ptr<T>(), n);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

std::pair<at::Tensor, at::Tensor> swiglu_backward(const at::Tensor& grad_in,
                                                  const at::Tensor& gate_in,
                                                  const at::Tensor& up_in) {
  check_alike("swiglu_backward", gate_in, up_in);
  check_alike("swiglu_backward", gate_in, grad_in);
  const at::Tensor grad = grad_in.contiguous(), gate = gate_in.contiguous(),
                   up = up_in.contiguous();
  const c10::cuda::CUDAGuard guard(gate.device());
  at::Tensor d_gate = at::empty_like(gate), d_up = at::empty_like(up);
  const int64_t n = gate.numel();
  if (n == 0) return {d_gate, d_up};
  by_dtype(gate.scalar_type(), [&](auto zero) {
    using T = decltype(zero);
    swiglu_backward_kernel<T><<<blocks_for(n), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        grad.data_ptr<T>(), gate.data_ptr<T>(), up.data_ptr<T>(), d_gate.data_ptr<T>(),
        d_up.data_ptr<T>(), n);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {d_gate, d_up};
}

}  // namespace vescale::cuda_kernels
