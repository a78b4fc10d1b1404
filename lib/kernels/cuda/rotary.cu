// Rotary embedding in one pass (NOTE [CUDA kernels]): ATen's path makes the angles, their cos and
// sin, the rotated half (a negation and a concatenation) and two products and a sum, each a
// kernel, forward and backward.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda_kernels.h"

namespace vescale::cuda_kernels {
namespace {

/// One thread a pair (i, i + D/2) of a row (b, h, t); `sign` -1 rotates back.
template <typename T>
__global__ void rotary_kernel(const T* __restrict__ x, const int64_t* __restrict__ positions,
                              const float* __restrict__ inv_freq, T* __restrict__ out,
                              int64_t pairs, int64_t t_len, int64_t half, float sign) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < pairs;
       p += stride) {
    const int64_t i = p % half;
    const int64_t row = p / half;  // (b, h, t) flattened, t fastest
    const int64_t t = row % t_len;
    const float angle = static_cast<float>(positions[t]) * inv_freq[i];
    const float c = cosf(angle), s = sign * sinf(angle);
    const int64_t lo = row * 2 * half + i, hi = lo + half;
    const float a = static_cast<float>(x[lo]), b = static_cast<float>(x[hi]);
    out[lo] = static_cast<T>(a * c - b * s);
    out[hi] = static_cast<T>(b * c + a * s);
  }
}

}  // namespace

at::Tensor rotary(const at::Tensor& x_in, const at::Tensor& positions_in,
                  const at::Tensor& inv_freq_in, bool inverse) {
  TORCH_CHECK(x_in.is_cuda() && x_in.dim() == 4 && x_in.size(3) % 2 == 0,
              "[kernels] rotary: x must be a CUDA tensor [B, H, T, D] with D even");
  const at::ScalarType t = x_in.scalar_type();
  TORCH_CHECK(takes(t), "[kernels] rotary: float32, bfloat16 or float16, not ", c10::toString(t));
  const int64_t t_len = x_in.size(2), half = x_in.size(3) / 2;
  TORCH_CHECK(positions_in.numel() == t_len && inv_freq_in.numel() == half,
              "[kernels] rotary: ", t_len, " positions and ", half, " frequencies expected");
  const c10::cuda::CUDAGuard guard(x_in.device());
  const at::Tensor x = x_in.contiguous();
  const at::Tensor positions = positions_in.to(x.device(), at::kLong).contiguous();
  const at::Tensor inv_freq = inv_freq_in.to(x.device(), at::kFloat).contiguous();
  at::Tensor out = at::empty_like(x);
  const int64_t pairs = x.numel() / 2;
  if (pairs == 0) return out;
  by_dtype(t, [&](auto zero) {
    using T = decltype(zero);
    rotary_kernel<T><<<blocks_for(pairs), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<T>(), positions.data_ptr<int64_t>(), inv_freq.data_ptr<float>(),
        out.data_ptr<T>(), pairs, t_len, half, inverse ? -1.0f : 1.0f);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace vescale::cuda_kernels
