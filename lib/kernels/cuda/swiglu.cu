// SwiGLU's product silu(gate) * up and its gradients, one pass each (NOTE [CUDA kernels]): ATen
// runs silu, the product, and in the backward silu's gradient and two products, each a kernel
// reading and writing [tokens, intermediate] tensors. 16 bytes a thread a load where the length
// and the pointers allow (every [tokens, intermediate] of a model: intermediate sizes are
// multiples of 8), 2 or 4 bytes otherwise.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <cstdint>
#include <initializer_list>

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

/// 16 bytes of T, the unit of the packed kernels' loads and stores (8 bf16 or float16, 4 float32):
/// a warp moves 512 bytes an instruction instead of 64 (issue [45]).
template <typename T>
struct alignas(16) Pack {
  T at[16 / sizeof(T)];
};

template <typename T>
__global__ void swiglu_forward_packed(const Pack<T>* __restrict__ gate,
                                      const Pack<T>* __restrict__ up, Pack<T>* __restrict__ out,
                                      int64_t packs) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < packs;
       i += stride) {
    const Pack<T> g = gate[i], u = up[i];
    Pack<T> o;
#pragma unroll
    for (int k = 0; k < static_cast<int>(16 / sizeof(T)); ++k) {
      const float x = static_cast<float>(g.at[k]);
      o.at[k] = static_cast<T>(x * sigmoid(x) * static_cast<float>(u.at[k]));
    }
    out[i] = o;
  }
}

template <typename T>
__global__ void swiglu_backward_packed(const Pack<T>* __restrict__ grad,
                                       const Pack<T>* __restrict__ gate,
                                       const Pack<T>* __restrict__ up, Pack<T>* __restrict__ d_gate,
                                       Pack<T>* __restrict__ d_up, int64_t packs) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < packs;
       i += stride) {
    const Pack<T> dy = grad[i], g = gate[i], u = up[i];
    Pack<T> dg, du;
#pragma unroll
    for (int k = 0; k < static_cast<int>(16 / sizeof(T)); ++k) {
      const float d = static_cast<float>(dy.at[k]), x = static_cast<float>(g.at[k]);
      const float s = sigmoid(x);
      du.at[k] = static_cast<T>(d * x * s);
      dg.at[k] = static_cast<T>(d * static_cast<float>(u.at[k]) * s * (1.0f + x * (1.0f - s)));
    }
    d_gate[i] = dg;
    d_up[i] = du;
  }
}

/// Whether n elements of T at each of `tensors` can go as packs: n a multiple of a pack and every
/// pointer on a 16-byte boundary (a contiguous view may start anywhere in its storage).
template <typename T>
bool packable(int64_t n, std::initializer_list<const at::Tensor*> tensors) {
  if (n % static_cast<int64_t>(16 / sizeof(T)) != 0) return false;
  for (const at::Tensor* t : tensors) {
    if (reinterpret_cast<uintptr_t>(t->data_ptr()) % 16 != 0) return false;
  }
  return true;
}

template <typename T>
const Pack<T>* packs_of(const at::Tensor& t) {
  return reinterpret_cast<const Pack<T>*>(t.data_ptr());
}
template <typename T>
Pack<T>* packs_of(at::Tensor& t) {
  return reinterpret_cast<Pack<T>*>(t.data_ptr());
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
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    if (packable<T>(n, {&gate, &up, &out})) {
      const int64_t packs = n / static_cast<int64_t>(16 / sizeof(T));
      swiglu_forward_packed<T><<<blocks_for(packs), kThreads, 0, stream>>>(
          packs_of<T>(gate), packs_of<T>(up), packs_of<T>(out), packs);
    } else {
      swiglu_forward_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(
          gate.data_ptr<T>(), up.data_ptr<T>(), out.data_ptr<T>(), n);
    }
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
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    if (packable<T>(n, {&grad, &gate, &up, &d_gate, &d_up})) {
      const int64_t packs = n / static_cast<int64_t>(16 / sizeof(T));
      swiglu_backward_packed<T><<<blocks_for(packs), kThreads, 0, stream>>>(
          packs_of<T>(grad), packs_of<T>(gate), packs_of<T>(up), packs_of<T>(d_gate),
          packs_of<T>(d_up), packs);
    } else {
      swiglu_backward_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(
          grad.data_ptr<T>(), gate.data_ptr<T>(), up.data_ptr<T>(), d_gate.data_ptr<T>(),
          d_up.data_ptr<T>(), n);
    }
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {d_gate, d_up};
}

}  // namespace vescale::cuda_kernels
