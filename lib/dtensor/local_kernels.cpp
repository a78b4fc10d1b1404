#include "dtensor/local_kernels.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

namespace vescale::local {

at::Tensor causal_bias(int64_t t, const at::TensorOptions& options) {
  // Ranks may be threads of one process (tests): the cache is shared under a lock. Entries are
  // never written after they are made.
  using Key = std::tuple<int64_t, at::ScalarType, std::string>;
  static std::mutex mutex;
  static std::map<Key, at::Tensor> cache;
  const Key key{t, options.dtype().toScalarType(), options.device().str()};
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(key);
  if (it == cache.end()) {
    const at::Tensor future = at::ones({t, t}, options.dtype(at::kBool)).triu(1);
    at::Tensor bias =
        at::zeros({t, t}, options).masked_fill(future, -std::numeric_limits<double>::infinity());
    it = cache.emplace(key, bias).first;
  }
  return it->second;
}

at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const int64_t b = q.size(0), h = q.size(1), t = q.size(2), d = q.size(3);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const at::Tensor q3 = q.reshape({b * h, t, d});
  const at::Tensor k3 = k.reshape({b * h, t, d});
  const at::Tensor v3 = v.reshape({b * h, t, d});
  const at::Tensor scores = at::add(causal_bias(t, q.options()), at::bmm(q3, k3.transpose(1, 2)),
                                    /*alpha=*/scale);
  return at::bmm(at::softmax(scores, -1), v3).view({b, h, t, d});
}

}  // namespace vescale::local
