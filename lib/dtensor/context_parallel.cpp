#include "dtensor/context_parallel.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "core/error.h"
#include "dtensor/kv_cache.h"
#include "dtensor/ring_attention.h"

namespace vescale {
namespace {

thread_local const comm::Group* open_ring = nullptr;

}  // namespace

ContextParallelScope::ContextParallelScope(const comm::Group* ring) : previous_(open_ring) {
  open_ring = ring != nullptr && ring->size() > 1 ? ring : nullptr;
}

ContextParallelScope::~ContextParallelScope() {
  open_ring = previous_;
}

const comm::Group* ContextParallelScope::ring() {
  return open_ring;
}

at::Tensor sequence_part(const at::Tensor& whole, int64_t dim, int rank, int size) {
  if (size == 1) return whole;
  const int64_t length = whole.size(dim);
  VS_CHECK(length % (2 * size) == 0,
           "[context parallel] a sequence of {} tokens does not split into 2 x {} chunks", length,
           size);
  const int64_t c = length / (2 * size);
  std::vector<at::Tensor> parts;
  for (int64_t id : ring_chunks(rank, size))
    parts.push_back(whole.narrow(dim, id * c, c));
  return at::cat(parts, dim);
}

std::vector<SequenceRun> sequence_runs(int64_t first, int64_t count, int64_t local_length) {
  const comm::Group* ring = open_ring;
  // Generation: the tokens follow those a KV cache holds (NOTE [KV cache]).
  const int64_t past = KvCacheScope::past();
  if (ring == nullptr) return {{first, past + first, count}};
  VS_CHECK(local_length % 2 == 0, "[context parallel] a rank's {} tokens are not two equal chunks",
           local_length);
  const int64_t c = local_length / 2;
  const std::array<int64_t, 2> chunks = ring_chunks(ring->rank(), ring->size());
  std::vector<SequenceRun> runs;
  for (int64_t i = 0; i < 2; ++i) {
    // Local chunk i holds global chunk chunks[i]: its part inside [first, first + count).
    const int64_t begin = std::max(first, i * c), end = std::min(first + count, (i + 1) * c);
    if (begin < end) runs.push_back({begin, past + chunks[i] * c + (begin - i * c), end - begin});
  }
  return runs;
}

int64_t global_sequence_length(int64_t local_length) {
  const comm::Group* ring = open_ring;
  return KvCacheScope::past() + (ring == nullptr ? local_length : local_length * ring->size());
}

at::Tensor sequence_positions(int64_t first, int64_t count, int64_t local_length,
                              const at::Device& device) {
  std::vector<at::Tensor> parts;
  for (const SequenceRun& run : sequence_runs(first, count, local_length))
    parts.push_back(
        at::arange(run.global, run.global + run.count, at::dtype(at::kLong).device(device)));
  if (parts.empty()) return at::empty({0}, at::dtype(at::kLong).device(device));
  return parts.size() == 1 ? parts[0] : at::cat(parts);
}

}  // namespace vescale
