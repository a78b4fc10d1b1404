#include "dtensor/local_kernels.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "core/blas.h"

namespace vescale::local {

at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  if (!b.defined() || x.is_cuda() || x.dim() < 2)
    return b.defined() ? at::linear(x, w, b) : at::linear(x, w);
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = w.size(0);
  at::Tensor y = at::mm(x.reshape({-1, x.size(-1)}), w.t());
  y.add_(b);
  return y.view(shape);
}

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

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// Query rows per block (NOTE [Blocked causal attention]): 32 at T <= 256, T / 8 beyond, so at
/// most 8 blocks of matmuls big enough to run near the BLAS's speed.
int64_t block_rows(int64_t t) {
  return std::max<int64_t>(32, (t / 8 + 31) / 32 * 32);
}

/// softmax(q k^T * scale + causal mask) v over q, k, v of shape [N, T, D], contiguous.
struct BlockedCausalAttention : torch::autograd::Function<BlockedCausalAttention> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v) {
    const int64_t t = q.size(1), rows = block_rows(t);
    const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(2)));
    const at::Tensor bias = causal_bias(t, q.options());
    variable_list saved{q, k, v}, outputs;
    for (int64_t s = 0; s < t; s += rows) {
      const int64_t e = std::min(t, s + rows);
      at::Tensor scores = blas::bmm(q.slice(1, s, e), k.slice(1, 0, e).transpose(1, 2), scale);
      // Only the diagonal [s, e) x [s, e) part of the block has masked entries.
      scores.slice(2, s, e).add_(bias.slice(0, s, e).slice(1, s, e));
      at::Tensor probs = at::_softmax(scores, -1, /*half_to_float=*/false);
      outputs.push_back(blas::bmm(probs, v.slice(1, 0, e)));
      saved.push_back(std::move(probs));
    }
    ctx->save_for_backward(saved);
    return at::cat(outputs, 1);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2];
    const at::Tensor dy = grads[0].contiguous();
    const int64_t t = q.size(1), rows = block_rows(t);
    const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(2)));
    // The last block meets every key: its dk and dv terms start the sums, the others add into
    // their key prefixes.
    variable_list dq_blocks;
    at::Tensor dk, dv;
    for (int64_t s = (t - 1) / rows * rows, i = 3 + s / rows; s >= 0; s -= rows, --i) {
      const int64_t e = std::min(t, s + rows);
      const at::Tensor& probs = saved[static_cast<size_t>(i)];
      const at::Tensor dy_i = dy.slice(1, s, e);
      const at::Tensor dv_i = blas::bmm(probs.transpose(1, 2), dy_i);
      const at::Tensor dscores = at::_softmax_backward_data(
          blas::bmm(dy_i, v.slice(1, 0, e).transpose(1, 2)), probs, -1, probs.scalar_type());
      dq_blocks.push_back(blas::bmm(dscores, k.slice(1, 0, e), scale));
      const at::Tensor dk_i = blas::bmm(dscores.transpose(1, 2), q.slice(1, s, e), scale);
      if (e == t) {
        dk = dk_i;
        dv = dv_i;
      } else {
        dk.slice(1, 0, e).add_(dk_i);
        dv.slice(1, 0, e).add_(dv_i);
      }
    }
    std::reverse(dq_blocks.begin(), dq_blocks.end());
    return {at::cat(dq_blocks, 1), dk, dv};
  }
};

}  // namespace

at::Tensor blocked_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const int64_t b = q.size(0), h = q.size(1), t = q.size(2), d = q.size(3);
  if (t < 2 * block_rows(t)) return causal_attention(q, k, v);
  const at::Tensor y = BlockedCausalAttention::apply(q.reshape({b * h, t, d}).contiguous(),
                                                     k.reshape({b * h, t, d}).contiguous(),
                                                     v.reshape({b * h, t, d}).contiguous());
  return y.view({b, h, t, d});
}

}  // namespace vescale::local
