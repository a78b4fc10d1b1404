// A mixture of experts' matmuls as grouped GEMMs (NOTE [Grouped experts]): the rows of every
// expert through that expert's weight in one launch, the groups' bounds read on the device, so
// that no host read of the token counts is needed and no expert waits for the previous one.
//
// A block computes one 64 x 64 tile of one group's output, over the depth in steps of 32: the
// tiles of A and B are staged in shared memory (zero beyond the group's rows and the matrices'
// edges), multiplied by tensor cores (WMMA, 16 x 16 x 16, float32 accumulators) for bf16 and
// float16, by the threads' own float32 products for float32, and the tile is written once in the
// output's type. No atomics: every output element is written by one block, from one order of
// summation, so a run gives the same bits every time.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <type_traits>
#include <vector>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda_kernels.h"

namespace vescale::cuda_kernels {
namespace {

constexpr int kBM = 64, kBN = 64, kBK = 32;  // a block's output tile and depth step
constexpr int kTileThreads = 128;            // four warps, 2 x 2, each 32 x 32 of the tile
constexpr int kPad = 8;                      // keeps WMMA's rows 32-byte aligned, eases banks
constexpr int kMaxGroups = 128;              // groups a launch; more go in further launches

/// The groups' weights (or their gradients) by group, passed by value as a kernel argument.
struct GroupPointers {
  void* at[kMaxGroups];
};

/// The element type in shared memory and for WMMA: float, __nv_bfloat16 or __half (c10's types
/// are the same 16 bits).
template <typename T>
struct Storage {
  using type = float;
};
template <>
struct Storage<c10::BFloat16> {
  using type = __nv_bfloat16;
};
template <>
struct Storage<c10::Half> {
  using type = __half;
};

// Unused in the passes where every 16-bit product takes WMMA: nvcc 13 warns of an unreferenced
// function in an unnamed namespace there.
[[maybe_unused]] __device__ __forceinline__ float to_float(float x) {
  return x;
}
[[maybe_unused]] __device__ __forceinline__ float to_float(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
[[maybe_unused]] __device__ __forceinline__ float to_float(__half x) {
  return __half2float(x);
}

template <typename S>
__device__ __forceinline__ S from_float(float x) {
  if constexpr (std::is_same_v<S, __nv_bfloat16>) {
    return __float2bfloat16(x);  // round to nearest even, as c10::BFloat16
  } else if constexpr (std::is_same_v<S, __half>) {
    return __float2half(x);
  } else {
    return x;
  }
}

/// Tensor cores for 16-bit types where the GPU has bf16 WMMA (sm_80 on); the host pass and older
/// targets take the threads' own products.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
template <typename S>
inline constexpr bool kTensorCores = !std::is_same_v<S, float>;
#else
template <typename S>
inline constexpr bool kTensorCores = false;
#endif

/// One output tile: C(i, j) = sum over kk < depth of A(i, kk) B(kk, j), for i < rows, j < cols,
/// where A(i, kk) = a[i a_i + kk a_k], B(kk, j) = b[kk b_k + j b_j], C(i, j) = c[i c_i + j].
template <typename S>
struct Tile {
  const S* a;
  int64_t a_i, a_k;
  const S* b;
  int64_t b_k, b_j;
  S* c;
  int64_t c_i;
  int rows, cols;
  int64_t depth;
};

template <typename S>
using TileA = S[kBM][kBK + kPad];
template <typename S>
using TileB = S[kBK][kBN + kPad];
using TileC = float[kBM][kBN + 4];

/// Stages the depth step at k0 of A and B in shared memory, zero beyond the tile's bounds; each
/// thread's consecutive elements along the matrix's contiguous dim.
template <typename S>
__device__ void stage(const Tile<S>& t, int64_t k0, TileA<S>& as, TileB<S>& bs) {
  const int tid = static_cast<int>(threadIdx.x);
  const S zero = from_float<S>(0.0f);
  const int64_t left = t.depth - k0;
  const int kn = left < kBK ? static_cast<int>(left) : kBK;
  const bool a_along_k = t.a_k == 1, b_along_j = t.b_j == 1;
  for (int idx = tid; idx < kBM * kBK; idx += kTileThreads) {
    const int i = a_along_k ? idx / kBK : idx % kBM, kk = a_along_k ? idx % kBK : idx / kBM;
    as[i][kk] = i < t.rows && kk < kn ? t.a[i * t.a_i + (k0 + kk) * t.a_k] : zero;
  }
  for (int idx = tid; idx < kBK * kBN; idx += kTileThreads) {
    const int j = b_along_j ? idx % kBN : idx / kBK, kk = b_along_j ? idx / kBN : idx % kBK;
    bs[kk][j] = j < t.cols && kk < kn ? t.b[(k0 + kk) * t.b_k + j * t.b_j] : zero;
  }
}

/// Writes the float32 tile in shared memory out in the output's type, within its bounds.
template <typename S>
__device__ void write_out(const Tile<S>& t, const TileC& cs) {
  for (int idx = static_cast<int>(threadIdx.x); idx < kBM * kBN; idx += kTileThreads) {
    const int i = idx / kBN, j = idx % kBN;
    if (i < t.rows && j < t.cols) t.c[i * t.c_i + j] = from_float<S>(cs[i][j]);
  }
}

/// The tile by the threads' own products: thread (ty, tx) sums rows ty + 8 r, columns tx + 16 q.
template <typename S>
__device__ void run_tile_simt(const Tile<S>& t) {
  __shared__ __align__(128) TileA<S> as;
  __shared__ __align__(128) TileB<S> bs;
  __shared__ __align__(128) TileC cs;
  const int tid = static_cast<int>(threadIdx.x), ty = tid / 16, tx = tid % 16;
  float acc[8][4] = {};
  for (int64_t k0 = 0; k0 < t.depth; k0 += kBK) {
    stage(t, k0, as, bs);
    __syncthreads();
    for (int kk = 0; kk < kBK; ++kk) {
      float av[8], bv[4];
      for (int r = 0; r < 8; ++r)
        av[r] = to_float(as[ty + 8 * r][kk]);
      for (int q = 0; q < 4; ++q)
        bv[q] = to_float(bs[kk][tx + 16 * q]);
      for (int r = 0; r < 8; ++r)
        for (int q = 0; q < 4; ++q)
          acc[r][q] = fmaf(av[r], bv[q], acc[r][q]);
    }
    __syncthreads();
  }
  for (int r = 0; r < 8; ++r)
    for (int q = 0; q < 4; ++q)
      cs[ty + 8 * r][tx + 16 * q] = acc[r][q];
  __syncthreads();
  write_out(t, cs);
}

/// The tile by tensor cores: warp (wr, wc) holds rows 32 wr.. and columns 32 wc.. of it as four
/// 16 x 16 float32 fragments.
template <typename S>
__device__ void run_tile_mma(const Tile<S>& t) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using namespace nvcuda;
  __shared__ __align__(128) TileA<S> as;
  __shared__ __align__(128) TileB<S> bs;
  __shared__ __align__(128) TileC cs;
  const int warp = static_cast<int>(threadIdx.x) / 32, wr = warp / 2, wc = warp % 2;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
  for (auto& row : acc)
    for (auto& f : row)
      wmma::fill_fragment(f, 0.0f);
  for (int64_t k0 = 0; k0 < t.depth; k0 += kBK) {
    stage(t, k0, as, bs);
    __syncthreads();
    for (int kk = 0; kk < kBK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, S, wmma::row_major> fa[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, S, wmma::row_major> fb[2];
      for (int x = 0; x < 2; ++x)
        wmma::load_matrix_sync(fa[x], &as[wr * 32 + x * 16][kk], kBK + kPad);
      for (int y = 0; y < 2; ++y)
        wmma::load_matrix_sync(fb[y], &bs[kk][wc * 32 + y * 16], kBN + kPad);
      for (int x = 0; x < 2; ++x)
        for (int y = 0; y < 2; ++y)
          wmma::mma_sync(acc[x][y], fa[x], fb[y], acc[x][y]);
    }
    __syncthreads();
  }
  for (int x = 0; x < 2; ++x)
    for (int y = 0; y < 2; ++y)
      wmma::store_matrix_sync(&cs[wr * 32 + x * 16][wc * 32 + y * 16], acc[x][y], kBN + 4,
                              wmma::mem_row_major);
  __syncthreads();
  write_out(t, cs);
#else
  (void)t;
#endif
}

template <typename S>
__device__ void run_tile(const Tile<S>& t) {
  if constexpr (kTensorCores<S>) {
    run_tile_mma(t);
  } else {
    run_tile_simt(t);
  }
}

/// NOTE [Group ends on the device]: the groups' ends are read on the device, where no host check
/// can see them, so the kernels hold them to what a valid list is: group g's rows are
/// [bound(g - 1), bound(g)), bound(g) the largest of ends[0..g] within [0, rows] (bound(-1) = 0).
/// Ends that overshoot M, or decrease, give groups that stop at M or hold no rows: no tile reads
/// or writes past x, y or dy, and no two groups share a row. Rows after the last group's end (ends
/// that stop short of M) belong to no group: grouped_mm writes them as zeros, and they add
/// nothing to any weight's gradient. Valid ends (non-decreasing, the last M) are unchanged. The
/// host's reference GEMMs (kReferenceGemm) refuse such ends instead: they read them anyway.
__device__ __forceinline__ int64_t clamp_end(int64_t end, int64_t start, int64_t rows) {
  return end < start ? start : end > rows ? rows : end;
}

/// bound(g - 1): where group g's rows start.
__device__ int64_t group_start(const int64_t* ends, int g, int64_t rows) {
  int64_t start = 0;
  for (int h = 0; h < g; ++h)
    start = clamp_end(ends[h], start, rows);
  return start;
}

/// y rows of group g = x rows of g times w_g^T (w_g [cols, depth]) or w_g (w_g [depth, cols]).
/// blockIdx.x walks the row tiles of groups first.. in turn, then, in the launch that holds the
/// last group (`tail`), the tiles of the rows after its end, written as zeros (NOTE [Group ends
/// on the device]); past those, nothing to do. blockIdx.y walks the column tiles.
template <typename S>
__global__ void __launch_bounds__(kTileThreads)
    grouped_rows_kernel(const S* __restrict__ x, const int64_t* __restrict__ ends, int first,
                        int groups, GroupPointers w, S* __restrict__ y, int64_t rows, int64_t cols,
                        int64_t depth, bool transpose_w, bool tail) {
  int64_t tile = blockIdx.x;
  int64_t start = group_start(ends, first, rows);
  const int64_t col0 = static_cast<int64_t>(blockIdx.y) * kBN;
  const int n_cols = static_cast<int>(cols - col0 < kBN ? cols - col0 : kBN);
  for (int g = 0; g < groups; ++g) {
    const int64_t end = clamp_end(ends[first + g], start, rows);
    const int64_t tiles = (end - start + kBM - 1) / kBM;
    if (tile >= tiles) {
      tile -= tiles;
      start = end;
      continue;
    }
    const int64_t row0 = start + tile * kBM;
    const auto* wg = static_cast<const S*>(w.at[g]);
    Tile<S> t;
    t.a = x + row0 * depth;
    t.a_i = depth;
    t.a_k = 1;
    t.b = transpose_w ? wg + col0 * depth : wg + col0;
    t.b_k = transpose_w ? 1 : cols;
    t.b_j = transpose_w ? depth : 1;
    t.c = y + row0 * cols + col0;
    t.c_i = cols;
    t.rows = static_cast<int>(end - row0 < kBM ? end - row0 : kBM);
    t.cols = n_cols;
    t.depth = depth;
    run_tile(t);
    return;
  }
  if (!tail) return;
  const int64_t row0 = start + tile * kBM;  // the rows of no group: zeros
  if (row0 >= rows) return;
  const int n_rows = static_cast<int>(rows - row0 < kBM ? rows - row0 : kBM);
  const S zero = from_float<S>(0.0f);
  for (int idx = static_cast<int>(threadIdx.x); idx < kBM * kBN; idx += kTileThreads) {
    const int i = idx / kBN, j = idx % kBN;
    if (i < n_rows && j < n_cols) y[(row0 + i) * cols + col0 + j] = zero;
  }
}

/// dw_g [n, k] = dy_g^T x_g over group g's rows (none: zeros), dy [M, n], x [M, k]. blockIdx.z is
/// the group (first + z), blockIdx.y the tile of n, blockIdx.x the tile of k.
template <typename S>
__global__ void __launch_bounds__(kTileThreads)
    grouped_weight_grad_kernel(const S* __restrict__ dy, const S* __restrict__ x,
                               const int64_t* __restrict__ ends, int first, GroupPointers dw,
                               int64_t rows, int64_t n, int64_t k) {
  const int g = first + static_cast<int>(blockIdx.z);
  const int64_t start = group_start(ends, g, rows), end = clamp_end(ends[g], start, rows);
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kBM;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kBN;
  Tile<S> t;
  t.a = dy + start * n + r0;
  t.a_i = 1;
  t.a_k = n;
  t.b = x + start * k + c0;
  t.b_k = k;
  t.b_j = 1;
  t.c = static_cast<S*>(dw.at[blockIdx.z]) + r0 * k + c0;
  t.c_i = k;
  t.rows = static_cast<int>(n - r0 < kBM ? n - r0 : kBM);
  t.cols = static_cast<int>(k - c0 < kBN ? k - c0 : kBN);
  t.depth = end - start;
  run_tile(t);
}

int64_t tiles_of(int64_t n, int tile) {
  return (n + tile - 1) / tile;
}

/// Calls launch(first, count, pointers) for each batch of at most kMaxGroups of `groups` groups,
/// pointers.at[g] = pointer(first + g).
template <typename Pointer, typename Launch>
void in_batches(int64_t groups, const Pointer& pointer, const Launch& launch) {
  for (int64_t first = 0; first < groups; first += kMaxGroups) {
    const int64_t count = groups - first < kMaxGroups ? groups - first : kMaxGroups;
    GroupPointers p{};
    for (int64_t g = 0; g < count; ++g)
      p.at[g] = pointer(first + g);
    launch(static_cast<int>(first), static_cast<int>(count), p);
  }
}

/// Checks what both entry points share: x 2-D on a CUDA device in a type we take, `ends` int64
/// [groups] on its device.
void check_rows(const char* what, const at::Tensor& x, const at::Tensor& ends) {
  TORCH_CHECK(x.is_cuda() && x.dim() == 2, "[kernels] ", what, ": rows [M, C] on a CUDA device");
  TORCH_CHECK(takes(x.scalar_type()), "[kernels] ", what, ": float32, bfloat16 or float16, not ",
              c10::toString(x.scalar_type()));
  TORCH_CHECK(ends.device() == x.device() && ends.dim() == 1 && ends.scalar_type() == at::kLong &&
                  ends.size(0) >= 1,
              "[kernels] ", what, ": the groups' ends, int64 [groups >= 1] on the rows' device");
}

}  // namespace

at::Tensor grouped_mm(const at::Tensor& x_in, const at::Tensor& ends_in,
                      const std::vector<at::Tensor>& w, bool transpose_w) {
  check_rows("grouped_mm", x_in, ends_in);
  TORCH_CHECK(static_cast<int64_t>(w.size()) == ends_in.size(0), "[kernels] grouped_mm: ", w.size(),
              " weights for ", ends_in.size(0), " groups");
  const int64_t depth = x_in.size(1);
  const int64_t cols = transpose_w ? w[0].size(0) : w[0].size(1);
  std::vector<at::Tensor> weights;
  for (const at::Tensor& wg : w) {
    TORCH_CHECK(wg.dim() == 2 && wg.sizes() == w[0].sizes() && wg.device() == x_in.device() &&
                    wg.scalar_type() == x_in.scalar_type(),
                "[kernels] grouped_mm: the weights alike, 2-D, of the rows' device and type");
    TORCH_CHECK((transpose_w ? wg.size(1) : wg.size(0)) == depth, "[kernels] grouped_mm: weights ",
                wg.sizes(), transpose_w ? " transposed" : "", " for rows of ", depth);
    weights.push_back(wg.contiguous());
  }
  TORCH_CHECK(tiles_of(cols, kBN) <= 65535, "[kernels] grouped_mm: ", cols,
              " columns are more than a grid's 65,535 tiles of ", kBN);
  const at::Tensor x = x_in.contiguous(), ends = ends_in.contiguous();
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor y = at::empty({x.size(0), cols}, x.options());
  if (y.numel() == 0) return y;
  by_dtype(x.scalar_type(), [&](auto zero) {
    using S = typename Storage<decltype(zero)>::type;
    const auto weight = [&](int64_t g) { return weights[static_cast<size_t>(g)].data_ptr(); };
    in_batches(
        static_cast<int64_t>(weights.size()), weight,
        [&](int first, int count, const GroupPointers& p) {
          // At most ceil(rows / 64) + groups + 1 row tiles: each group's last may be
          // partial, and so may the rows of no group after the last (the tail).
          const bool tail = first + count == static_cast<int64_t>(weights.size());
          const dim3 grid(static_cast<unsigned>(tiles_of(x.size(0), kBM) + count + 1),
                          static_cast<unsigned>(tiles_of(cols, kBN)));
          grouped_rows_kernel<S><<<grid, kTileThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
              reinterpret_cast<const S*>(x.data_ptr()), ends.data_ptr<int64_t>(), first, count, p,
              reinterpret_cast<S*>(y.data_ptr()), x.size(0), cols, depth, transpose_w, tail);
          C10_CUDA_KERNEL_LAUNCH_CHECK();
        });
  });
  return y;
}

at::Tensor grouped_weight_grads(const at::Tensor& dy_in, const at::Tensor& x_in,
                                const at::Tensor& ends_in) {
  check_rows("grouped_weight_grads", x_in, ends_in);
  TORCH_CHECK(dy_in.dim() == 2 && dy_in.size(0) == x_in.size(0) &&
                  dy_in.device() == x_in.device() && dy_in.scalar_type() == x_in.scalar_type(),
              "[kernels] grouped_weight_grads: dy [M, N] and x [M, K] of one device and type");
  const at::Tensor dy = dy_in.contiguous(), x = x_in.contiguous(), ends = ends_in.contiguous();
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t groups = ends.size(0), n = dy.size(1), k = x.size(1);
  TORCH_CHECK(tiles_of(n, kBM) <= 65535, "[kernels] grouped_weight_grads: ", n,
              " rows of a weight are more than a grid's 65,535 tiles of ", kBM);
  at::Tensor dw = at::empty({groups, n, k}, x.options());
  if (dw.numel() == 0) return dw;
  by_dtype(x.scalar_type(), [&](auto zero) {
    using S = typename Storage<decltype(zero)>::type;
    in_batches(
        groups, [&](int64_t g) { return dw[g].data_ptr(); },
        [&](int first, int count, const GroupPointers& p) {
          const dim3 grid(static_cast<unsigned>(tiles_of(k, kBN)),
                          static_cast<unsigned>(tiles_of(n, kBM)), static_cast<unsigned>(count));
          grouped_weight_grad_kernel<S>
              <<<grid, kTileThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
                  reinterpret_cast<const S*>(dy.data_ptr()),
                  reinterpret_cast<const S*>(x.data_ptr()), ends.data_ptr<int64_t>(), first, p,
                  x.size(0), n, k);
          C10_CUDA_KERNEL_LAUNCH_CHECK();
        });
  });
  return dw;
}

}  // namespace vescale::cuda_kernels
