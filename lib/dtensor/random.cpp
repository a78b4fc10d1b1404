#include "dtensor/random.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>

#include <algorithm>
#include <array>
#include <cmath>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "core/error.h"
#include "core/host_parallel.h"

namespace vescale {
namespace {

// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11).
using Counter = std::array<uint32_t, 4>;

// NOTE [Fast init]
// Building a model's parameters draws, for every element, one Philox block, a log, a square root
// and a cosine. A 0.57B-parameter Llama (llama-1b.toml with 10 layers) took 36 s to build on the
// 2-core machine when each element was made alone in float64 on the rank's one intra-op thread,
// its global index found by a division per dim, and the tensor cast to its dtype in a second
// pass; it takes 7.2 s now (docs/benchmarks.md, Parameter init):
//   - the box is cut into rows along its last dim and the rows spread over the rank's cores
//     (core/host_parallel.h); a row's global indices are consecutive, one division per row;
//   - the Philox blocks of a run of kRun elements are drawn together, lane by lane, which the
//     compiler turns into vector multiplies (philox_run is compiled for AVX-512, AVX2 and plain
//     x86-64, and the loader picks what the processor has): 11 ns an element became 4;
//   - the cosines of a run are taken in the order of their arguments, since libm's cos branches
//     on the argument's range and quadrant and random arguments mispredict: 20 ns became 14;
//   - each value is cast to the dtype as it is written.
// The log and the cosine stay libm's scalar functions (a vector libm rounds differently), and
// every element gets the same float64 arithmetic and the same static_cast ATen's copy makes: the
// values are bit for bit those of before (tests/dtensor/random_test.cpp checks them against a
// reference written in Python). libm's two calls are now most of the time, about 20 of 25 ns.

// Philox4x32-10 constants.
constexpr uint32_t kM0 = 0xD2511F53, kM1 = 0xCD9E8D57, kW0 = 0x9E3779B9, kW1 = 0xBB67AE85;

Counter philox(Counter ctr, uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t{kM0} * ctr[0];
    const uint64_t p1 = uint64_t{kM1} * ctr[2];
    ctr = {static_cast<uint32_t>(p1 >> 32) ^ ctr[1] ^ k0, static_cast<uint32_t>(p1),
           static_cast<uint32_t>(p0 >> 32) ^ ctr[3] ^ k1, static_cast<uint32_t>(p0)};
    k0 += kW0;
    k1 += kW1;
  }
  return ctr;
}

/// Elements whose Philox blocks are drawn together.
constexpr int64_t kRun = 256;

#if defined(__x86_64__) && defined(__GNUC__)
#define VS_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define VS_VECTOR_CLONES
#endif

/// The two 53-bit integers behind the uniforms of elements first .. first + n - 1 (n <= kRun) of
/// the stream: Philox4x32-10 of counter (index, stream) and key seed, its words 0-1 and 2-3.
VS_VECTOR_CLONES void philox_run(const RngKey& key, uint64_t first, int64_t n, uint64_t* a,
                                 uint64_t* b) {
  // Each 32-bit word in a 64-bit lane: the multiplies take the lanes' low halves as they are, and
  // no lane changes width between rounds.
  constexpr uint64_t kLow = 0xFFFFFFFF;
  uint64_t c0[kRun], c1[kRun], c2[kRun], c3[kRun];
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t index = first + static_cast<uint64_t>(i);
    c0[i] = index & kLow;
    c1[i] = index >> 32;
    c2[i] = key.stream & kLow;
    c3[i] = key.stream >> 32;
  }
  uint64_t k0 = key.seed & kLow, k1 = key.seed >> 32;
  for (int round = 0; round < 10; ++round) {
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t p0 = uint64_t{kM0} * c0[i];
      const uint64_t p1 = uint64_t{kM1} * c2[i];
      c0[i] = (p1 >> 32) ^ c1[i] ^ k0;
      c1[i] = p1 & kLow;
      c2[i] = (p0 >> 32) ^ c3[i] ^ k1;
      c3[i] = p0 & kLow;
    }
    k0 = (k0 + kW0) & kLow;
    k1 = (k1 + kW1) & kLow;
  }
  for (int64_t i = 0; i < n; ++i) {
    a[i] = ((c0[i] << 32) | c1[i]) >> 11;
    b[i] = ((c2[i] << 32) | c3[i]) >> 11;
  }
}

/// A uniform in (0, 1] from 53 random bits (converted as a signed integer, the same value: an
/// unsigned conversion costs a branch).
inline double unit(uint64_t bits) {
  return (static_cast<double>(static_cast<int64_t>(bits)) + 1.0) * (1.0 / 9007199254740992.0);
}

/// sqrt(x), correctly rounded as std::sqrt is, for x >= 0 or -0 (no errno to set, so no branch).
inline double correct_sqrt(double x) {
#if defined(__SSE2__)
  return _mm_cvtsd_f64(_mm_sqrt_sd(_mm_set_sd(x), _mm_set_sd(x)));
#else
  return std::sqrt(x);
#endif
}

/// The indices 0 .. n - 1 ordered by the top 6 bits of bits[i] (a counting sort, stable).
inline void by_64ths(const uint64_t* bits, int64_t n, int64_t* order) {
  int64_t start[65] = {};
  for (int64_t i = 0; i < n; ++i)
    ++start[(bits[i] >> 47) + 1];  // 53 bits: the top 6 are bits 47-52
  for (int k = 1; k <= 64; ++k)
    start[k] += start[k - 1];
  for (int64_t i = 0; i < n; ++i)
    order[start[bits[i] >> 47]++] = i;
}

/// A CPU tensor of `dtype` holding, for the box's elements, static_cast<dtype> of the values
/// f(a, b, n, values) writes for runs of n <= kRun consecutive elements, where a[j] and b[j] are
/// the two 53-bit integers of element j's global index (philox_run).
template <typename F>
at::Tensor generate(const RngKey& key, const Box& box, at::ScalarType dtype, F f) {
  // Written directly: the floating types and bool, whose static_cast is ATen's cast. Others
  // (integers, complex) take the float64 values through ATen's copy.
  const bool direct = dtype == at::kDouble || dtype == at::kFloat || dtype == at::kBFloat16 ||
                      dtype == at::kHalf || dtype == at::kBool;
  if (!direct) return generate(key, box, at::kDouble, f).to(dtype);
  at::Tensor out = at::empty(box.sizes, at::dtype(dtype).device(kCpu));
  const int64_t numel = out.numel();
  if (numel == 0) return out;
  const int64_t ndim = static_cast<int64_t>(box.shape.size());
  std::vector<int64_t> strides(ndim, 1);  // of the global tensor, row-major
  for (int64_t d = ndim - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * box.shape[d + 1];
  const int64_t row = ndim == 0 ? 1 : box.sizes[ndim - 1];
  const int64_t rows = numel / row;
  // Rows per task: enough elements that a thread's start-up is noise.
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / row);
  AT_DISPATCH_ALL_TYPES_AND3(at::kBFloat16, at::kHalf, at::kBool, dtype, "vescale_generate", [&] {
    scalar_t* data = out.data_ptr<scalar_t>();
    host_parallel_for(rows, grain, [&](int64_t first, int64_t last) {
      uint64_t a[kRun], b[kRun];
      double values[kRun];
      for (int64_t r = first; r < last; ++r) {
        int64_t rest = r, global = ndim == 0 ? 0 : box.offsets[ndim - 1];
        for (int64_t d = ndim - 2; d >= 0; --d) {
          global += (rest % box.sizes[d] + box.offsets[d]) * strides[d];
          rest /= box.sizes[d];
        }
        scalar_t* dst = data + r * row;
        for (int64_t i = 0; i < row; i += kRun) {
          const int64_t n = std::min(kRun, row - i);
          philox_run(key, static_cast<uint64_t>(global + i), n, a, b);
          f(a, b, n, values);
          for (int64_t j = 0; j < n; ++j)
            dst[i + j] = static_cast<scalar_t>(values[j]);
        }
      }
    });
  });
  return out;
}

}  // namespace

uint64_t stream_id(std::string_view name) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

RngKey derive(RngKey key, uint64_t salt) {
  // Mix the salt through one Philox call so that nearby salts give unrelated streams.
  const Counter mixed =
      philox({static_cast<uint32_t>(salt), static_cast<uint32_t>(salt >> 32),
              static_cast<uint32_t>(key.stream), static_cast<uint32_t>(key.stream >> 32)},
             0x5EED, 0xD00D);
  return {key.seed, (uint64_t{mixed[0]} << 32) | mixed[1]};
}

at::Tensor normal(const RngKey& key, const Box& box, double mean, double std, at::ScalarType dtype,
                  Device device) {
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  return generate(key, box, dtype,
                  [&](const uint64_t* a, const uint64_t* b, int64_t n, double* out) {
                    // The cosines in the order of their arguments' 64ths of the circle: libm's
                    // cos branches on the argument's range and quadrant, and random arguments
                    // mispredict those branches (20 ns a call here, 14 ns so ordered).
                    int64_t order[kRun];
                    by_64ths(b, n, order);
                    for (int64_t k = 0; k < n; ++k) {
                      const int64_t j = order[k];
                      out[j] = std::cos(kTwoPi * unit(b[j]));
                    }
                    for (int64_t j = 0; j < n; ++j)
                      out[j] = mean + std * correct_sqrt(-2.0 * std::log(unit(a[j]))) * out[j];
                  })
      .to(device);
}

at::Tensor uniform(const RngKey& key, const Box& box, double low, double high, at::ScalarType dtype,
                   Device device) {
  return generate(key, box, dtype,
                  [&](const uint64_t* a, const uint64_t*, int64_t n, double* out) {
                    for (int64_t j = 0; j < n; ++j)
                      out[j] = low + (high - low) * (1.0 - unit(a[j]));
                  })
      .to(device);
}

at::Tensor keep_mask(const RngKey& key, const Box& box, double keep, Device device) {
  VS_CHECK(keep >= 0 && keep <= 1, "[random] keep probability {} is not in [0, 1]", keep);
  return generate(key, box, at::kBool,
                  [&](const uint64_t* a, const uint64_t*, int64_t n, double* out) {
                    for (int64_t j = 0; j < n; ++j)
                      out[j] = unit(a[j]) <= keep ? 1.0 : 0.0;
                  })
      .to(device);
}

}  // namespace vescale
