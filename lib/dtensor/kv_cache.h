// The keys and values a generation keeps between its forwards (NOTE [KV cache]).
//
// NOTE [KV cache]
// Generating runs the model on a prompt once (prefill) and then on one new token per step. While
// a KvCacheScope is open on a thread, ops::causal_attention does not attend within its input
// alone: it writes the layer's new keys and values after those cached by the earlier forwards
// (the layer's slot: attention calls come in layer order, so the n-th call of a forward is layer
// n) and attends with the new queries to every cached position and to the new ones before them.
// The cache holds each rank's local shards, [B, H_local, capacity, D], so it is sharded like the
// attention heads under any plan. Positions continue the sequence: sequence_positions (learned
// and rotary positions) start at the cached length, so every logit is the full forward's at the
// same position. A step costs one token's forward plus attention over the cache, the same at
// every position but for that attention: no longer the whole sequence's forward.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace vescale {

class KvCache {
 public:
  /// Room for `capacity` positions (the model's block_size).
  explicit KvCache(int64_t capacity);

  /// Positions cached by the forwards finished so far.
  int64_t length() const { return length_; }
  int64_t capacity() const { return capacity_; }
  /// Bytes of the layers' key and value buffers on this rank.
  int64_t bytes() const;

  /// Called by causal_attention under a scope: stores the new keys and values k, v [B, H, t, D]
  /// of the next layer of this forward, and returns attention of q [B, H, t, D] to the layer's
  /// cached and new positions.
  at::Tensor attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);
  /// Ends a forward of `t` new positions: they are cached from now on.
  void advance(int64_t t);
  /// Forgets every position (the buffers stay for the next prefill).
  void reset();

 private:
  struct Layer {
    at::Tensor k, v;  // [B, H, capacity, D]
  };
  std::vector<Layer> layers_;
  int64_t capacity_;
  int64_t length_ = 0;
  size_t next_ = 0;  // the layer of this forward's next attention call
};

/// While open on this thread, causal attention reads and extends `cache`, and positions start at
/// its length.
class KvCacheScope {
 public:
  explicit KvCacheScope(KvCache* cache);
  ~KvCacheScope();
  KvCacheScope(const KvCacheScope&) = delete;
  KvCacheScope& operator=(const KvCacheScope&) = delete;

  /// The open scope's cache, or null.
  static KvCache* cache();
  /// Positions before this forward's tokens: the open cache's length, else 0.
  static int64_t past();

 private:
  KvCache* previous_;
};

}  // namespace vescale
