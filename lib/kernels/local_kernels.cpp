#include "kernels/local_kernels.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/csrc/autograd/saved_variable.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "core/autograd_node.h"
#include "core/blas.h"

namespace vescale::local {

at::Tensor aten_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  return b.defined() ? at::linear(x, w, b) : at::linear(x, w);
}

at::Tensor linear_mm_add(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  if (!b.defined() || x.dim() < 2) return aten_linear(x, w, b);
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = w.size(0);
  at::Tensor y = at::mm(x.reshape({-1, x.size(-1)}), w.t());
  y.add_(b);
  return y.view(shape);
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w, double eps) {
  const bool widen = x.scalar_type() != at::kDouble && x.scalar_type() != at::kFloat;
  const at::Tensor h = widen ? x.to(at::kFloat) : x;
  const at::Tensor normed = h * at::rsqrt(h.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return w * normed.to(x.scalar_type());
}

at::Tensor rotary(const at::Tensor& x, double theta, const at::Tensor& positions) {
  const int64_t d = x.size(3);
  const at::ScalarType angle_type = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const auto options = at::TensorOptions().dtype(angle_type).device(x.device());
  const at::Tensor angles = at::outer(positions.to(options), rotary_inv_freq(d, theta, options));
  const at::Tensor both = at::cat({angles, angles}, -1);  // [T, D]
  const at::Tensor cos = both.cos().to(x.scalar_type()), sin = both.sin().to(x.scalar_type());
  const at::Tensor half1 = x.narrow(3, 0, d / 2), half2 = x.narrow(3, d / 2, d / 2);
  const at::Tensor rotated = at::cat({-half2, half1}, 3);
  return x * cos + rotated * sin;
}

at::Tensor rotary_inv_freq(int64_t d, double theta, const at::TensorOptions& options) {
  // On the host whatever the device: a GPU's powf and the host's pow differ in the last bit, and
  // one ulp of a frequency moves the angle at position 1,000 by 1e-4 (our CUDA rotary against
  // the explicit row on the CPU, issue [45]). In the options' type, as Hugging Face computes them
  // (float32 on the host), so the float32 frequencies are bitwise theirs. Cached, as causal_bias.
  using Key = std::tuple<int64_t, double, at::ScalarType, std::string>;
  static std::mutex mutex;
  static std::map<Key, at::Tensor> cache;
  const at::ScalarType dtype = options.dtype().toScalarType();
  const Key key{d, theta, dtype, options.device().str()};
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(key);
  if (it == cache.end()) {
    const at::Tensor exponents = at::arange(0, d, 2, at::dtype(dtype)) / static_cast<double>(d);
    it = cache.emplace(key, at::reciprocal(at::pow(theta, exponents)).to(options.device())).first;
  }
  return it->second;
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

namespace {

/// softmax(q k^T * scale + bias) v for q [B, H, t, D] and k, v [B, H, n, D]: `bias` an additive
/// [t, n] mask of 0 and -inf applied by the pass that scales (NOTE [Explicit attention]), or
/// undefined for none.
at::Tensor biased_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const at::Tensor& bias) {
  const int64_t b = q.size(0), h = q.size(1), t = q.size(2), d = q.size(3), n = k.size(2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const at::Tensor q3 = q.reshape({b * h, t, d});
  const at::Tensor k3 = k.reshape({b * h, n, d});
  const at::Tensor v3 = v.reshape({b * h, n, d});
  at::Tensor scores = at::bmm(q3, k3.transpose(1, 2));
  scores = bias.defined() ? at::add(bias, scores, /*alpha=*/scale) : scores.mul_(scale);
  return at::bmm(at::softmax(scores, -1), v3).view({b, h, t, d});
}

}  // namespace

at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  return biased_attention(q, k, v, causal_bias(q.size(2), q.options()));
}

at::Tensor cached_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            int64_t past) {
  const int64_t t = q.size(2), n = k.size(2);
  TORCH_CHECK(n == past + t, "[attention] ", n, " keys for ", past, " cached and ", t,
              " new positions");
  if (t == 1) return biased_attention(q, k, v, at::Tensor());  // one query sees every key
  if (past == 0) return causal_attention(q, k, v);
  // Query i (position past + i) sees keys [0, past + i].
  const at::Tensor keys = at::arange(n, q.options().dtype(at::kLong));
  const at::Tensor queries = at::arange(t, q.options().dtype(at::kLong)).add_(past);
  const at::Tensor bias = at::zeros({t, n}, q.options())
                              .masked_fill_(keys.unsqueeze(0) > queries.unsqueeze(1),
                                            -std::numeric_limits<double>::infinity());
  return biased_attention(q, k, v, bias);
}

namespace {

using torch::autograd::variable_list;

/// Query rows per block (NOTE [Blocked causal attention]): 32 at T <= 256, T / 8 beyond, so at
/// most 8 blocks of matmuls big enough to run near the BLAS's speed.
int64_t block_rows(int64_t t) {
  return std::max<int64_t>(32, (t / 8 + 31) / 32 * 32);
}

/// An empty [B, H, T, D] tensor like `like` whose memory is [B, T, H, D]: the layout the model's
/// reshapes to and from heads need, so those are views, not copies. Strided, not a transposed
/// view, so that autograd can give it a history of its own.
at::Tensor heads_layout(const at::Tensor& like) {
  const int64_t b = like.size(0), h = like.size(1), t = like.size(2), d = like.size(3);
  return at::empty_strided({b, h, t, d}, {t * h * d, d, h * d, 1}, like.options());
}

/// The backward of blocked_causal_attention: the inputs (saved, so that changing one in place
/// after the forward is an error, not a wrong gradient) and each block's probabilities.
struct BlockedCausalAttentionBackward : torch::autograd::Node {
  torch::autograd::SavedVariable q_, k_, v_;
  std::vector<at::Tensor> probs;  ///< block i: rows [i * rows, (i + 1) * rows)

  std::string name() const override { return "BlockedCausalAttentionBackward"; }
  void release_variables() override {
    q_.reset_data();
    k_.reset_data();
    v_.reset_data();
    probs.clear();
  }

  variable_list apply(variable_list&& grads) override {
    const at::Tensor q = q_.unpack(), k = k_.unpack(), v = v_.unpack();
    TORCH_CHECK(q.defined(), "[attention] backward a second time without retain_graph");
    if (!grads[0].defined()) return {at::Tensor(), at::Tensor(), at::Tensor()};
    const at::Tensor dy = grads[0].stride(3) == 1 ? grads[0] : grads[0].contiguous();
    const int64_t t = q.size(2), rows = block_rows(t);
    const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
    at::Tensor dq = heads_layout(q), dk = heads_layout(k), dv = heads_layout(v);
    // From the last block, which meets every key and so writes all of dk and dv; the others add
    // into their key prefixes (beta = 1).
    for (int64_t s = (t - 1) / rows * rows, i = s / rows; s >= 0; s -= rows, --i) {
      const int64_t e = std::min(t, s + rows);
      const double beta = e == t ? 0.0 : 1.0;
      const at::Tensor& p = probs[static_cast<size_t>(i)];
      const at::Tensor dy_i = dy.slice(2, s, e);
      blas::matmul_into(dv.slice(2, 0, e), p.transpose(2, 3), dy_i, 1.0, beta);
      at::Tensor dprobs = at::empty_like(p);
      blas::matmul_into(dprobs, dy_i, v.slice(2, 0, e).transpose(2, 3), 1.0, 0.0);
      const at::Tensor dscores = at::_softmax_backward_data(dprobs, p, -1, p.scalar_type());
      blas::matmul_into(dq.slice(2, s, e), dscores, k.slice(2, 0, e), scale, 0.0);
      blas::matmul_into(dk.slice(2, 0, e), dscores.transpose(2, 3), q.slice(2, s, e), scale, beta);
    }
    return {dq, dk, dv};
  }
};

/// softmax(q k^T * scale + causal mask) v over q, k, v of shape [B, H, T, D], each with a unit
/// stride in D, a block of query rows at a time; the output lives in [B, T, H, D] memory. Keeps
/// each block's probabilities in `saved` when it is given.
at::Tensor blocked_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           BlockedCausalAttentionBackward* saved) {
  const int64_t t = q.size(2), rows = block_rows(t);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  const at::Tensor bias = causal_bias(t, q.options());
  at::Tensor y = heads_layout(q);
  for (int64_t s = 0; s < t; s += rows) {
    const int64_t e = std::min(t, s + rows);
    at::Tensor scores = at::empty({q.size(0), q.size(1), e - s, e}, q.options());
    blas::matmul_into(scores, q.slice(2, s, e), k.slice(2, 0, e).transpose(2, 3), scale, 0.0);
    // Only the diagonal [s, e) x [s, e) part of the block has masked entries.
    scores.slice(3, s, e).add_(bias.slice(0, s, e).slice(1, s, e));
    at::Tensor probs = at::_softmax(scores, -1, /*half_to_float=*/false);
    blas::matmul_into(y.slice(2, s, e), probs, v.slice(2, 0, e), 1.0, 0.0);
    if (saved != nullptr) saved->probs.push_back(std::move(probs));
  }
  return y;
}

}  // namespace

at::Tensor blocked_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const int64_t t = q.size(2);
  if (t < 2 * block_rows(t)) return causal_attention(q, k, v);
  // A hand-made autograd node rather than torch::autograd::Function, whose apply() set off a
  // false -Warray-bounds in GCC 13 (its std::vector<bool> of which inputs are variables).
  const bool track = torch::autograd::GradMode::is_enabled() &&
                     (q.requires_grad() || k.requires_grad() || v.requires_grad());
  auto unit_last = [](const at::Tensor& x) {
    return x.stride(3) == 1 ? x.detach() : x.detach().contiguous();
  };
  const at::Tensor qu = unit_last(q), ku = unit_last(k), vu = unit_last(v);
  NodePtr<BlockedCausalAttentionBackward> node;
  if (track) {
    node = make_node<BlockedCausalAttentionBackward>();
    node->q_ = torch::autograd::SavedVariable(qu, false);
    node->k_ = torch::autograd::SavedVariable(ku, false);
    node->v_ = torch::autograd::SavedVariable(vu, false);
  }
  at::Tensor y;
  {
    const torch::autograd::AutoGradMode no_grad(false);
    y = blocked_forward(qu, ku, vu, node.get());
  }
  if (!track) return y;
  node->set_next_edges(torch::autograd::collect_next_edges(q, k, v));
  torch::autograd::set_history(y, node);
  return y;
}

}  // namespace vescale::local
