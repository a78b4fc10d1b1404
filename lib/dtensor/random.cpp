#include "dtensor/random.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <array>
#include <cmath>

#include "core/error.h"

namespace vescale {
namespace {

// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11).
using Counter = std::array<uint32_t, 4>;

Counter philox(Counter ctr, uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53, kM1 = 0xCD9E8D57, kW0 = 0x9E3779B9, kW1 = 0xBB67AE85;
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

/// Two uniforms in (0, 1] with 53 random bits each, for element `index` of the stream.
std::pair<double, double> uniforms(const RngKey& key, uint64_t index) {
  const Counter out =
      philox({static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32),
              static_cast<uint32_t>(key.stream), static_cast<uint32_t>(key.stream >> 32)},
             static_cast<uint32_t>(key.seed), static_cast<uint32_t>(key.seed >> 32));
  auto to_unit = [](uint32_t hi, uint32_t lo) {
    const uint64_t bits = ((uint64_t{hi} << 32) | lo) >> 11;  // 53 bits
    return (static_cast<double>(bits) + 1.0) * (1.0 / 9007199254740992.0);
  };
  return {to_unit(out[0], out[1]), to_unit(out[2], out[3])};
}

/// Fills a float64 CPU tensor with f(global index) over the box's elements.
template <typename F>
at::Tensor generate(const Box& box, F f) {
  at::Tensor out = at::empty(box.sizes, at::dtype(at::kDouble).device(kCpu));
  const int64_t numel = out.numel();
  if (numel == 0) return out;
  const int64_t ndim = static_cast<int64_t>(box.shape.size());
  std::vector<int64_t> strides(ndim, 1);  // of the global tensor, row-major
  for (int64_t d = ndim - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * box.shape[d + 1];
  double* data = out.data_ptr<double>();
  at::parallel_for(0, numel, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      int64_t rest = i, global = 0;
      for (int64_t d = ndim - 1; d >= 0; --d) {
        const int64_t local_index = rest % box.sizes[d];
        rest /= box.sizes[d];
        global += (local_index + box.offsets[d]) * strides[d];
      }
      data[i] = f(static_cast<uint64_t>(global));
    }
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
  return generate(box,
                  [&](uint64_t i) {
                    const auto [u1, u2] = uniforms(key, i);
                    return mean + std * std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
                  })
      .to(device, dtype);
}

at::Tensor uniform(const RngKey& key, const Box& box, double low, double high, at::ScalarType dtype,
                   Device device) {
  return generate(box,
                  [&](uint64_t i) { return low + (high - low) * (1.0 - uniforms(key, i).first); })
      .to(device, dtype);
}

at::Tensor keep_mask(const RngKey& key, const Box& box, double keep, Device device) {
  VS_CHECK(keep >= 0 && keep <= 1, "[random] keep probability {} is not in [0, 1]", keep);
  return generate(box, [&](uint64_t i) { return uniforms(key, i).first <= keep ? 1.0 : 0.0; })
      .to(device, at::kBool);
}

}  // namespace vescale
