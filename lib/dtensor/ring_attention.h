// Ring attention: causal self-attention over a sequence split across the ranks of a group
// (context parallelism), each rank holding two chunks of it.
//
// NOTE [Ring attention]
// The sequence of T tokens is cut into 2 P equal chunks for the P ranks of the group; rank r holds
// chunks r and 2 P - 1 - r, concatenated (causal load balancing: a chunk late in the sequence,
// which attends to many keys, is paired with an early one, which attends to few, so every rank
// does the same work). Queries stay put; keys and values go around the ring, r to r + 1: at step
// s rank r holds those of rank r - s, while the next step's are already in flight. A query chunk
// meets a key chunk whole when the key chunk comes earlier in the sequence, under the causal mask
// when it is the same chunk, and not at all when it comes later: rank r computes 2 diagonal blocks
// and 1 whole block with its own keys and 2 whole blocks with every other rank's. Each block's
// output and log-sum-exp are merged into the running ones (the online softmax):
//   lse' = log(exp(lse) + exp(lse_b)),  out' = out exp(lse - lse') + out_b exp(lse_b - lse').
// Only q, k, v, the output and the log-sum-exp are kept for the backward (no T x T
// probabilities). The backward sends the keys and values around the same ring again, with an
// accumulator of their gradients that starts at the first rank after their owner and arrives
// back at the owner after P - 1 hops. Bytes per rank: the forward sends its key/value chunk
// pair P - 1 times; the backward sends it P - 1 times and its gradients P - 1 times.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>

#include "comm/group.h"

namespace vescale {

/// The chunks of the 2 `size` chunks of a sequence that rank `rank` of a ring holds, in the order
/// it concatenates them: {rank, 2 size - 1 - rank}.
std::array<int64_t, 2> ring_chunks(int rank, int size);

/// softmax(q k^T / sqrt(D) + causal mask) v for this rank's queries, where q, k, v [B, H, T_local,
/// D] hold this rank's two chunks (ring_chunks) of the sequence, concatenated along T_local (even).
/// Differentiable in q, k and v. *Collective* over `ring` (p2p), in the forward and the backward.
at::Tensor ring_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 const comm::Group& ring);

}  // namespace vescale
