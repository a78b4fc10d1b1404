// The residual add and the norm after it in one kernel a direction (NOTE [CUDA kernels],
// kernels/add_norm.h): ATen runs the add, then the norm's statistics and its output, and in the
// backward the norm's backward and an add of the residual's gradient, each a pass over [tokens, C].
// Here a block takes a row: it writes the sum (rounded to the input's type, as ATen's add rounds
// it), reduces its mean and variance in float32 from the sum it wrote, and writes the normed
// row; the backward reads the sum, the weight and the two gradients once and writes the input's
// gradient, with the weight's (and bias's) gradients summed a block at a time into float32
// partials that one sum over blocks finishes (no atomics: the same bits every run).
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda_kernels.h"

namespace vescale::cuda_kernels {
namespace {

/// The block's sum of `v`, in every thread.
__device__ float add_norm_block_sum(float v) {
  __shared__ float warps[kThreads / 32];
  __shared__ float total;
  for (int offset = 16; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warps[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kThreads / 32 ? warps[lane] : 0.0f;
    for (int offset = 16; offset > 0; offset /= 2)
      v += __shfl_xor_sync(0xffffffffu, v, offset);
    if (lane == 0) total = v;
  }
  __syncthreads();
  const float out = total;
  __syncthreads();  // `total` and `warps` are free for the next call
  return out;
}

/// Rows of C: sum = T(x + delta); LayerNorm: normed = T((sum - mean) rstd w + b); RMSNorm:
/// normed = T(T(sum rstd) w) (local::rms_norm casts before the weight).
template <typename T, bool kLayerNorm>
__global__ void __launch_bounds__(kThreads)
    add_norm_forward_kernel(const T* __restrict__ x, const T* __restrict__ delta,
                            const T* __restrict__ w, const T* __restrict__ b, T* __restrict__ sum,
                            T* __restrict__ normed, float* __restrict__ mean_out,
                            float* __restrict__ rstd_out, int64_t rows, int64_t c, float eps) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t base = row * c;
    float local = 0.0f;
    for (int64_t j = threadIdx.x; j < c; j += kThreads) {
      const T s =
          static_cast<T>(static_cast<float>(x[base + j]) + static_cast<float>(delta[base + j]));
      sum[base + j] = s;
      const float f = static_cast<float>(s);
      local += kLayerNorm ? f : f * f;
    }
    const float first = add_norm_block_sum(local) / static_cast<float>(c);
    float mean = 0.0f, rstd;
    if (kLayerNorm) {
      mean = first;
      float squares = 0.0f;
      for (int64_t j = threadIdx.x; j < c; j += kThreads) {
        const float d = static_cast<float>(sum[base + j]) - mean;  // this thread wrote it
        squares += d * d;
      }
      rstd = rsqrtf(add_norm_block_sum(squares) / static_cast<float>(c) + eps);
    } else {
      rstd = rsqrtf(first + eps);
    }
    for (int64_t j = threadIdx.x; j < c; j += kThreads) {
      const float s = static_cast<float>(sum[base + j]);
      if (kLayerNorm) {
        normed[base + j] =
            static_cast<T>((s - mean) * rstd * static_cast<float>(w[j]) + static_cast<float>(b[j]));
      } else {
        const float scaled = static_cast<float>(static_cast<T>(s * rstd));
        normed[base + j] = static_cast<T>(scaled * static_cast<float>(w[j]));
      }
    }
    if (threadIdx.x == 0) {
      mean_out[row] = mean;
      rstd_out[row] = rstd;
    }
  }
}

/// Rows of C: with xhat = (sum - mean) rstd (RMSNorm: sum rstd) and g = d_normed w,
/// d_sum_total = rstd (g - mean(g) - xhat mean(g xhat)) + d_sum (RMSNorm: no mean(g) term),
/// into d_x and d_delta; block k adds its rows' d_normed xhat and d_normed to partial_w[k] and
/// partial_b[k].
template <typename T, bool kLayerNorm>
__global__ void __launch_bounds__(kThreads)
    add_norm_backward_kernel(const T* __restrict__ d_sum, const T* __restrict__ d_normed,
                             const T* __restrict__ sum, const T* __restrict__ w,
                             const float* __restrict__ mean_in, const float* __restrict__ rstd_in,
                             T* __restrict__ d_x, T* __restrict__ d_delta,
                             float* __restrict__ partial_w, float* __restrict__ partial_b,
                             int64_t rows, int64_t c) {
  float* pw = partial_w + blockIdx.x * c;
  float* pb = kLayerNorm ? partial_b + blockIdx.x * c : nullptr;
  for (int64_t j = threadIdx.x; j < c; j += kThreads) {
    pw[j] = 0.0f;
    if (kLayerNorm) pb[j] = 0.0f;
  }
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t base = row * c;
    const float mean = mean_in[row], rstd = rstd_in[row];
    float g_sum = 0.0f, g_xhat = 0.0f;
    for (int64_t j = threadIdx.x; j < c; j += kThreads) {
      const float dn = static_cast<float>(d_normed[base + j]);
      const float xhat = (static_cast<float>(sum[base + j]) - mean) * rstd;
      const float g = dn * static_cast<float>(w[j]);
      g_sum += g;
      g_xhat += g * xhat;
      // RMSNorm's weight multiplies the normed rows rounded to T (local::rms_norm).
      pw[j] += dn * (kLayerNorm ? xhat : static_cast<float>(static_cast<T>(xhat)));
      if (kLayerNorm) pb[j] += dn;
    }
    const float inv_c = 1.0f / static_cast<float>(c);
    const float mean_g = kLayerNorm ? add_norm_block_sum(g_sum) * inv_c : 0.0f;
    const float mean_g_xhat = add_norm_block_sum(g_xhat) * inv_c;
    for (int64_t j = threadIdx.x; j < c; j += kThreads) {
      const float xhat = (static_cast<float>(sum[base + j]) - mean) * rstd;
      const float g = static_cast<float>(d_normed[base + j]) * static_cast<float>(w[j]);
      float d = rstd * (g - mean_g - xhat * mean_g_xhat);
      if (d_sum != nullptr) d += static_cast<float>(d_sum[base + j]);
      d_x[base + j] = static_cast<T>(d);
      d_delta[base + j] = static_cast<T>(d);
    }
  }
}

void check_add_norm(const char* what, const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.is_cuda() && b.device() == a.device(), "[kernels] ", what,
              ": tensors on one CUDA device");
  TORCH_CHECK(a.scalar_type() == b.scalar_type() && takes(a.scalar_type()), "[kernels] ", what,
              ": tensors of one dtype, float32, bfloat16 or float16, not ",
              c10::toString(a.scalar_type()), " and ", c10::toString(b.scalar_type()));
}

}  // namespace

AddNorm add_norm_forward(bool layer_norm, const at::Tensor& x_in, const at::Tensor& delta_in,
                         const at::Tensor& w_in, const at::Tensor& b_in, double eps) {
  check_add_norm("add_norm_forward", x_in, delta_in);
  check_add_norm("add_norm_forward", x_in, w_in);
  if (layer_norm) check_add_norm("add_norm_forward", x_in, b_in);
  TORCH_CHECK(x_in.sizes() == delta_in.sizes() && x_in.dim() >= 1 && w_in.dim() == 1 &&
                  w_in.size(0) == x_in.size(-1) && (!layer_norm || b_in.sizes() == w_in.sizes()),
              "[kernels] add_norm_forward: x and delta [..., C] alike, w and b [C]");
  const c10::cuda::CUDAGuard guard(x_in.device());
  const at::Tensor x = x_in.contiguous(), delta = delta_in.contiguous(), w = w_in.contiguous();
  const at::Tensor b = layer_norm ? b_in.contiguous() : at::Tensor();
  const int64_t c = x.size(-1), rows = c == 0 ? 0 : x.numel() / c;
  AddNorm out{at::empty_like(x), at::empty_like(x),
              at::empty({rows}, x.options().dtype(at::kFloat)),
              at::empty({rows}, x.options().dtype(at::kFloat))};
  if (rows == 0) return out;
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(rows, 65535));
  by_dtype(x.scalar_type(), [&](auto zero) {
    using T = decltype(zero);
    auto launch = [&](auto kernel) {
      kernel<<<grid, kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
          x.data_ptr<T>(), delta.data_ptr<T>(), w.data_ptr<T>(),
          layer_norm ? b.data_ptr<T>() : nullptr, out.sum.data_ptr<T>(), out.normed.data_ptr<T>(),
          out.mean.data_ptr<float>(), out.rstd.data_ptr<float>(), rows, c, static_cast<float>(eps));
    };
    if (layer_norm) {
      launch(add_norm_forward_kernel<T, true>);
    } else {
      launch(add_norm_forward_kernel<T, false>);
    }
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

AddNormGrads add_norm_backward(bool layer_norm, const at::Tensor& d_sum_in,
                               const at::Tensor& d_normed_in, const at::Tensor& sum_in,
                               const at::Tensor& w_in, const at::Tensor& mean_in,
                               const at::Tensor& rstd_in) {
  check_add_norm("add_norm_backward", sum_in, w_in);
  TORCH_CHECK((!d_normed_in.defined() || d_normed_in.sizes() == sum_in.sizes()) &&
                  (!d_sum_in.defined() || d_sum_in.sizes() == sum_in.sizes()),
              "[kernels] add_norm_backward: gradients of the sum's shape");
  const c10::cuda::CUDAGuard guard(sum_in.device());
  const at::Tensor sum = sum_in.contiguous(), w = w_in.contiguous();
  const int64_t c = sum.size(-1), rows = c == 0 ? 0 : sum.numel() / c;
  // An output no one used has an undefined gradient: zeros for the normed rows, none for the sum.
  const at::Tensor d_normed =
      d_normed_in.defined() ? d_normed_in.to(sum.scalar_type()).contiguous() : at::zeros_like(sum);
  const at::Tensor d_sum =
      d_sum_in.defined() ? d_sum_in.to(sum.scalar_type()).contiguous() : at::Tensor();
  const at::Tensor mean = mean_in.contiguous(), rstd = rstd_in.contiguous();
  AddNormGrads g{at::empty_like(sum), at::empty_like(sum), at::Tensor(), at::Tensor()};
  const int64_t blocks = std::max<int64_t>(1, std::min<int64_t>(rows, 512));
  at::Tensor partial_w = at::empty({blocks, c}, sum.options().dtype(at::kFloat));
  at::Tensor partial_b = at::empty({layer_norm ? blocks : 0, c}, sum.options().dtype(at::kFloat));
  if (rows > 0) {
    by_dtype(sum.scalar_type(), [&](auto zero) {
      using T = decltype(zero);
      auto launch = [&](auto kernel) {
        kernel<<<static_cast<unsigned>(blocks), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
            d_sum.defined() ? d_sum.data_ptr<T>() : nullptr, d_normed.data_ptr<T>(),
            sum.data_ptr<T>(), w.data_ptr<T>(), mean.data_ptr<float>(), rstd.data_ptr<float>(),
            g.d_x.data_ptr<T>(), g.d_delta.data_ptr<T>(), partial_w.data_ptr<float>(),
            layer_norm ? partial_b.data_ptr<float>() : nullptr, rows, c);
      };
      if (layer_norm) {
        launch(add_norm_backward_kernel<T, true>);
      } else {
        launch(add_norm_backward_kernel<T, false>);
      }
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  } else {
    partial_w.zero_();
    partial_b.zero_();
  }
  g.d_w = partial_w.sum(0).to(w.scalar_type());
  if (layer_norm) g.d_b = partial_b.sum(0).to(w.scalar_type());
  return g;
}

}  // namespace vescale::cuda_kernels
