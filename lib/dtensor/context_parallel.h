// Context parallelism as the ops see it: while a ContextParallelScope is open on a thread, the
// sequences of the activations are this rank's part of each sequence, its two chunks of the ring
// (NOTE [Ring attention]) concatenated. Ops that depend on where a token sits in its sequence
// ask here: causal_attention runs as a ring, rotary turns and dropout masks by the tokens'
// global positions, and models look up position embeddings through sequence_positions. Outside a
// scope (no context parallelism) a rank's sequence is the whole one and every answer is the
// identity, but under a KV cache (NOTE [KV cache]): there positions start after the cached ones.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "comm/group.h"

namespace vescale {

class ContextParallelScope {
 public:
  /// `ring`: the cp group (null or a single rank: no context parallelism). It must outlive the
  /// scope and the backward of what runs in it.
  explicit ContextParallelScope(const comm::Group* ring);
  ~ContextParallelScope();
  ContextParallelScope(const ContextParallelScope&) = delete;
  ContextParallelScope& operator=(const ContextParallelScope&) = delete;

  /// The ring of the open scope, if it has more than one rank; else null.
  static const comm::Group* ring();

 private:
  const comm::Group* previous_;
};

/// Rank `rank`'s part of `whole` along its sequence dim `dim` under context parallelism over
/// `size` ranks: its two chunks (ring_chunks) concatenated. The length must split into 2 x size
/// chunks.
at::Tensor sequence_part(const at::Tensor& whole, int64_t dim, int rank, int size);

/// A run of a rank's sequence part that is one run of the whole sequence: local positions
/// [local, local + count) are global positions [global, global + count).
struct SequenceRun {
  int64_t local = 0, global = 0, count = 0;
};

/// The runs of local positions [first, first + count) of a rank's part of `local_length` tokens,
/// in order (one run outside a scope).
std::vector<SequenceRun> sequence_runs(int64_t first, int64_t count, int64_t local_length);
/// The whole sequence's length for a rank's part of `local_length` tokens.
int64_t global_sequence_length(int64_t local_length);
/// The global positions of local positions [first, first + count) of a rank's part of
/// `local_length` tokens: [count] int64 on `device`.
at::Tensor sequence_positions(int64_t first, int64_t count, int64_t local_length,
                              const at::Device& device);

}  // namespace vescale
