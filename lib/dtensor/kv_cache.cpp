#include "dtensor/kv_cache.h"

#include <ATen/ATen.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "kernels/local_kernels.h"

namespace vescale {
namespace {

thread_local KvCache* open_cache = nullptr;

}  // namespace

KvCache::KvCache(int64_t capacity) : capacity_(capacity) {
  VS_CHECK(capacity > 0, "[kv cache] capacity {}", capacity);
}

int64_t KvCache::bytes() const {
  int64_t n = 0;
  for (const Layer& l : layers_)
    n += static_cast<int64_t>(l.k.nbytes() + l.v.nbytes());
  return n;
}

at::Tensor KvCache::attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const int64_t t = k.size(2);
  VS_USER_CHECK(length_ + t <= capacity_,
                "[kv cache] {} cached and {} new positions exceed the model's {} (block_size)",
                length_, t, capacity_);
  if (next_ == layers_.size()) {
    std::vector<int64_t> shape = k.sizes().vec();
    shape[2] = capacity_;
    layers_.push_back({at::empty(shape, k.options()), at::empty(shape, v.options())});
  }
  Layer& layer = layers_[next_++];
  VS_CHECK(
      layer.k.size(0) == k.size(0) && layer.k.size(1) == k.size(1) && layer.k.size(3) == k.size(3),
      "[kv cache] layer {} keys of shape {} after {}", next_ - 1, k.sizes(), layer.k.sizes());
  layer.k.narrow(2, length_, t).copy_(k);
  layer.v.narrow(2, length_, t).copy_(v);
  return local::cached_attention(q, layer.k.narrow(2, 0, length_ + t),
                                 layer.v.narrow(2, 0, length_ + t), length_);
}

void KvCache::advance(int64_t t) {
  VS_CHECK(next_ == layers_.size(), "[kv cache] a forward ran {} of {} layers", next_,
           layers_.size());
  length_ += t;
  next_ = 0;
}

void KvCache::reset() {
  length_ = 0;
  next_ = 0;
}

KvCacheScope::KvCacheScope(KvCache* cache) : previous_(open_cache) {
  open_cache = cache;
}

KvCacheScope::~KvCacheScope() {
  open_cache = previous_;
}

KvCache* KvCacheScope::cache() {
  return open_cache;
}

int64_t KvCacheScope::past() {
  return open_cache == nullptr ? 0 : open_cache->length();
}

}  // namespace vescale
