#include "generate/sampler.h"

#include <ATen/ATen.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "core/error.h"

namespace vescale {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace

double uniform_for(uint64_t seed, int64_t row, int64_t step) {
  const uint64_t mixed = splitmix64(splitmix64(seed) ^ splitmix64(static_cast<uint64_t>(row) << 32 ^
                                                                  static_cast<uint64_t>(step)));
  return static_cast<double>(mixed >> 11) * 0x1.0p-53;
}

int64_t pick_token(const at::Tensor& logits, const SamplingOptions& o, int64_t row, int64_t step) {
  const at::Tensor l = logits.detach().to(at::kCPU, at::kDouble).contiguous();
  VS_CHECK(l.dim() == 1 && l.numel() > 0, "[generate] logits of shape {}", l.sizes());
  const double* x = l.data_ptr<double>();
  const int64_t n = l.numel();
  if (o.greedy) return std::max_element(x, x + n) - x;
  VS_CHECK(o.temperature > 0, "[generate] temperature {}", o.temperature);
  // Candidates from the most to the least likely, equals by index: a fixed order on any layout.
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [x](int64_t a, int64_t b) { return x[a] > x[b]; });
  size_t kept = order.size();
  if (o.top_k > 0) kept = std::min(kept, static_cast<size_t>(o.top_k));
  std::vector<double> p(kept);
  for (size_t i = 0; i < kept; ++i)
    p[i] = std::exp((x[order[i]] - x[order[0]]) / o.temperature);
  double total = std::accumulate(p.begin(), p.end(), 0.0);
  if (o.top_p < 1.0) {
    // The shortest head whose probability reaches top_p.
    double mass = 0;
    size_t head = 0;
    while (head < kept && mass < o.top_p * total)
      mass += p[head++];
    kept = std::max<size_t>(head, 1);
    total = std::accumulate(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(kept), 0.0);
  }
  const double u = uniform_for(o.seed, row, step) * total;
  double cumulative = 0;
  for (size_t i = 0; i < kept; ++i) {
    cumulative += p[i];
    if (u < cumulative) return order[i];
  }
  return order[kept - 1];
}

}  // namespace vescale
