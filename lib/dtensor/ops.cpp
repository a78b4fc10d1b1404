#include "dtensor/ops.h"

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <fmt/ranges.h>

#include <cmath>

#include "core/error.h"
#include "core/ignore_target.h"
#include "dtensor/context_parallel.h"
#include "dtensor/kv_cache.h"
#include "dtensor/linear_cross_entropy.h"
#include "dtensor/op_driver.h"
#include "dtensor/recompute.h"
#include "dtensor/ring_attention.h"
#include "dtensor/transitions.h"
#include "kernels/kernel_table.h"
#include "kernels/local_kernels.h"

namespace vescale::ops {

using detail::DimRule;
using detail::OpCall;
using detail::PartialPolicy;
using detail::run_op;
using Locals = std::vector<at::Tensor>;
using Specs = std::vector<const DTensorSpec*>;

namespace {

std::function<DimRule(int64_t)> fixed(DimRule rule) {
  return [rule](int64_t) { return rule; };
}

DTensor elementwise(const char* name, const std::vector<const DTensor*>& inputs,
                    PartialPolicy policy, std::function<at::Tensor(const Locals&)> fn) {
  std::vector<std::vector<int64_t>> shapes;
  std::vector<int64_t> out = inputs[0]->shape();
  for (const DTensor* in : inputs) {
    shapes.push_back(in->shape());
    out = at::infer_size(out, in->shape());
  }
  return run_op({name, inputs, fixed(detail::elementwise_rule(shapes, out, policy)), out,
                 [fn](const Locals& l, const Specs&, const DTensorSpec&) { return fn(l); }});
}

std::vector<int64_t> shape_of(const std::vector<int64_t>& base, int64_t drop_last,
                              std::vector<int64_t> tail) {
  std::vector<int64_t> out(base.begin(), base.end() - drop_last);
  out.insert(out.end(), tail.begin(), tail.end());
  return out;
}

/// keep_mask of `box` (rows in dim 0, positions in dim 1), with the positions of this rank's
/// part of each sequence under context parallelism: the mask of the whole sequence's tokens.
at::Tensor sequence_keep_mask(const RngKey& key, Box box, double keep, const Device& device) {
  if (ContextParallelScope::ring() == nullptr || box.shape.size() < 2)
    return keep_mask(key, box, keep, device);
  const int64_t local_length = box.shape[1];
  box.shape[1] = global_sequence_length(local_length);
  std::vector<at::Tensor> parts;
  for (const SequenceRun& run : sequence_runs(box.offsets[1], box.sizes[1], local_length)) {
    Box part = box;
    part.offsets[1] = run.global;
    part.sizes[1] = run.count;
    parts.push_back(keep_mask(key, part, keep, device));
  }
  return at::cat(parts, 1);
}

}  // namespace

DTensor linear(const DTensor& x, const DTensor& w, const std::optional<DTensor>& b) {
  VS_CHECK(w.ndim() == 2 && x.ndim() >= 1 && x.size(-1) == w.size(1),
           "[dtensor] linear: input [{}] does not fit weight [{}]", fmt::join(x.shape(), ", "),
           fmt::join(w.shape(), ", "));
  const int64_t x_ndim = x.ndim();
  return run_op({"linear",
                 {&x, &w, b ? &*b : nullptr},
                 fixed(detail::linear_rule(x_ndim)),
                 shape_of(x.shape(), 1, {w.size(0)}),
                 [](const Locals& l, const Specs&, const DTensorSpec&) {
                   return kernels::linear(l[0], l[1], l[2]);  // NOTE [Kernel table]
                 }});
}

std::vector<DTensor> linear_group(const DTensor& x, const std::vector<const DTensor*>& ws,
                                  const std::vector<const DTensor*>& bs) {
  const size_t n = ws.size();
  VS_CHECK(n >= 1 && (bs.empty() || bs.size() == n),
           "[dtensor] linear_group: {} weights and {} biases", n, bs.size());
  std::vector<const DTensor*> inputs{&x};
  std::vector<std::vector<int64_t>> shapes;
  for (size_t i = 0; i < n; ++i) {
    const DTensor& w = *ws[i];
    VS_CHECK(w.ndim() == 2 && x.size(-1) == w.size(1) && w.placements() == ws[0]->placements() &&
                 (bs.empty() || bs[i]->placements() == bs[0]->placements()),
             "[dtensor] linear_group: weight {} [{}] does not fit input [{}] or the others' "
             "placements",
             i, fmt::join(w.shape(), ", "), fmt::join(x.shape(), ", "));
    inputs.push_back(&w);
    shapes.push_back(shape_of(x.shape(), 1, {w.size(0)}));
  }
  for (const DTensor* b : bs)
    inputs.push_back(b);
  if (bs.empty()) inputs.push_back(nullptr);
  const int64_t x_ndim = x.ndim();
  const bool bias = !bs.empty();
  return run_op(detail::MultiOpCall{
      "linear_group", inputs,
      [x_ndim, n, bias](int64_t) { return detail::linear_group_rule(x_ndim, n, bias); }, shapes,
      [n, bias](const Locals& l, const Specs&, const std::vector<DTensorSpec>&) {
        std::vector<at::Tensor> weights(l.begin() + 1, l.begin() + 1 + static_cast<long>(n));
        std::vector<int64_t> rows;
        for (const at::Tensor& w : weights)
          rows.push_back(w.size(0));
        at::Tensor b;
        if (bias)
          b = at::cat(std::vector<at::Tensor>(l.begin() + 1 + static_cast<long>(n), l.end()));
        const at::Tensor y = kernels::linear(l[0], at::cat(weights), b);
        return y.split_with_sizes(rows, -1);
      }});
}

DTensor matmul(const DTensor& a, const DTensor& b) {
  VS_CHECK(a.ndim() >= 2 && b.ndim() >= 2 && a.size(-1) == b.size(-2),
           "[dtensor] matmul: [{}] @ [{}] do not fit", fmt::join(a.shape(), ", "),
           fmt::join(b.shape(), ", "));
  std::vector<int64_t> batch =
      at::infer_size(std::vector<int64_t>(a.shape().begin(), a.shape().end() - 2),
                     std::vector<int64_t>(b.shape().begin(), b.shape().end() - 2));
  batch.push_back(a.size(-2));
  batch.push_back(b.size(-1));
  return run_op(
      {"matmul",
       {&a, &b},
       fixed(detail::matmul_rule(a.ndim(), b.ndim())),
       batch,
       [](const Locals& l, const Specs&, const DTensorSpec&) { return at::matmul(l[0], l[1]); }});
}

DTensor add(const DTensor& a, const DTensor& b) {
  return elementwise("add", {&a, &b}, PartialPolicy::kAll,
                     [](const Locals& l) { return l[0] + l[1]; });
}
DTensor sub(const DTensor& a, const DTensor& b) {
  return elementwise("sub", {&a, &b}, PartialPolicy::kAll,
                     [](const Locals& l) { return l[0] - l[1]; });
}
DTensor mul(const DTensor& a, const DTensor& b) {
  return elementwise("mul", {&a, &b}, PartialPolicy::kOneAny,
                     [](const Locals& l) { return l[0] * l[1]; });
}
DTensor div(const DTensor& a, const DTensor& b) {
  return elementwise("div", {&a, &b}, PartialPolicy::kOneFirst,
                     [](const Locals& l) { return l[0] / l[1]; });
}
DTensor scale(const DTensor& x, double factor) {
  return elementwise("scale", {&x}, PartialPolicy::kOneAny,
                     [factor](const Locals& l) { return l[0] * factor; });
}
DTensor add_scalar(const DTensor& x, double value) {
  return elementwise("add_scalar", {&x}, PartialPolicy::kNone,
                     [value](const Locals& l) { return l[0] + value; });
}

DTensor to_dtype(const DTensor& x, at::ScalarType dtype) {
  if (x.to_local().scalar_type() == dtype) return x;
  return elementwise("to_dtype", {&x}, PartialPolicy::kOneAny,
                     [dtype](const Locals& l) { return l[0].to(dtype); });
}

DTensor gelu(const DTensor& x) {
  return elementwise("gelu", {&x}, PartialPolicy::kNone,
                     [](const Locals& l) { return at::gelu(l[0]); });
}

DTensor silu(const DTensor& x) {
  return elementwise("silu", {&x}, PartialPolicy::kNone,
                     [](const Locals& l) { return at::silu(l[0]); });
}

DTensor swiglu(const DTensor& gate, const DTensor& up) {
  return elementwise("swiglu", {&gate, &up}, PartialPolicy::kNone,
                     [](const Locals& l) { return kernels::swiglu(l[0], l[1]); });
}

DTensor dropout(const DTensor& x, double p, const RngKey& key, bool training, int64_t row_offset,
                int64_t global_rows) {
  VS_CHECK(p >= 0 && p < 1, "[dtensor] dropout probability {} is not in [0, 1)", p);
  if (!training || p == 0) return x;
  const double keep = 1.0 - p;
  return run_op({"dropout",
                 {&x},
                 fixed(detail::elementwise_rule({x.shape()}, x.shape(), PartialPolicy::kOneAny)),
                 x.shape(),
                 [=](const Locals& l, const Specs& s, const DTensorSpec&) {
                   Box box = Box::local(*s[0]);
                   box.offsets[0] += row_offset;
                   if (global_rows > 0) box.shape[0] = global_rows;
                   at::Tensor mask =
                       sequence_keep_mask(key, box, keep, l[0].device()).to(l[0].scalar_type());
                   return l[0] * mask / keep;
                 }});
}

DTensor layer_norm(const DTensor& x, const DTensor& weight, const DTensor& bias, double eps) {
  const int64_t c = x.size(-1);
  VS_CHECK(weight.shape() == std::vector<int64_t>{c} && bias.shape() == std::vector<int64_t>{c},
           "[dtensor] layer_norm: weight and bias must be [{}]", c);
  return run_op({"layer_norm",
                 {&x, &weight, &bias},
                 fixed(detail::norm_rule(x.ndim(), 2)),
                 x.shape(),
                 [c, eps](const Locals& l, const Specs&, const DTensorSpec&) {
                   return at::layer_norm(l[0], {c}, l[1], l[2], eps);
                 }});
}

DTensor rms_norm(const DTensor& x, const DTensor& weight, double eps) {
  const int64_t c = x.size(-1);
  VS_CHECK(weight.shape() == std::vector<int64_t>{c}, "[dtensor] rms_norm: weight must be [{}]", c);
  return run_op({"rms_norm",
                 {&x, &weight},
                 fixed(detail::norm_rule(x.ndim(), 1)),
                 x.shape(),
                 [eps](const Locals& l, const Specs&, const DTensorSpec&) {
                   return local::rms_norm(l[0], l[1], eps);
                 }});
}

namespace {

/// The rule of ops::add's elementwise add of two tensors of `shape`.
DimRule add_rule(const std::vector<int64_t>& shape) {
  return detail::elementwise_rule({shape, shape}, shape, PartialPolicy::kAll);
}

/// Whether the norm after ops::add(x, delta) keeps the sum's placement on every mesh dim: then
/// one op does both with ops::add's redistributions and no more (the norm would move nothing).
bool add_then_norm_fuses(const DTensor& x, const DTensor& delta, size_t params) {
  if (x.shape() != delta.shape() || x.placements().size() != delta.placements().size())
    return false;
  const DimRule add = add_rule(x.shape());
  const DimRule norm = detail::norm_rule(x.ndim(), params);
  for (size_t d = 0; d < x.placements().size(); ++d) {
    const detail::DimStrategy sum = add({x.placements()[d], delta.placements()[d]});
    Placements norm_inputs(1 + params, Placement::replicate());
    norm_inputs[0] = sum.output;
    const detail::DimStrategy normed = norm(norm_inputs);
    if (normed.inputs[0] != sum.output || normed.output != sum.output) return false;
  }
  return true;
}

/// (x + delta, norm(x + delta)) as one op (kernels::add_norm) where add_then_norm_fuses, else
/// ops::add, then `unfused_norm`.
std::pair<DTensor, DTensor> add_norm(NormKind kind, const DTensor& x, const DTensor& delta,
                                     const DTensor& weight, const DTensor* bias, double eps,
                                     const std::function<DTensor(const DTensor&)>& unfused_norm) {
  const size_t params = bias != nullptr ? 2 : 1;
  if (!add_then_norm_fuses(x, delta, params)) {
    DTensor sum = add(x, delta);
    DTensor normed = unfused_norm(sum);
    return {sum, normed};
  }
  const DimRule add = add_rule(x.shape());
  const DimRule rule = [add, params](const Placements& in) -> detail::DimStrategy {
    detail::DimStrategy s = add({in[0], in[1]});
    s.inputs.resize(2 + params, Placement::replicate());
    return s;
  };
  std::vector<const DTensor*> inputs{&x, &delta, &weight};
  if (bias != nullptr) inputs.push_back(bias);
  std::vector<DTensor> out = run_op(detail::MultiOpCall{
      kind == NormKind::kLayerNorm ? "add_layer_norm" : "add_rms_norm",
      inputs,
      fixed(rule),
      {x.shape(), x.shape()},
      [kind, eps](const Locals& l, const Specs&, const std::vector<DTensorSpec>&) {
        auto [sum, normed] =
            kernels::add_norm(kind, l[0], l[1], l[2], l.size() > 3 ? l[3] : at::Tensor(), eps);
        return std::vector<at::Tensor>{sum, normed};
      }});
  return {out[0], out[1]};
}

}  // namespace

std::pair<DTensor, DTensor> add_layer_norm(const DTensor& x, const DTensor& delta,
                                           const DTensor& weight, const DTensor& bias, double eps) {
  return add_norm(NormKind::kLayerNorm, x, delta, weight, &bias, eps,
                  [&](const DTensor& sum) { return layer_norm(sum, weight, bias, eps); });
}

std::pair<DTensor, DTensor> add_rms_norm(const DTensor& x, const DTensor& delta,
                                         const DTensor& weight, double eps) {
  return add_norm(NormKind::kRmsNorm, x, delta, weight, nullptr, eps,
                  [&](const DTensor& sum) { return rms_norm(sum, weight, eps); });
}

DTensor rotary(const DTensor& x, double theta) {
  VS_CHECK(x.ndim() == 4 && x.size(3) % 2 == 0,
           "[dtensor] rotary: x must be [B, H, T, D] with D even, not [{}]",
           fmt::join(x.shape(), ", "));
  return run_op({"rotary",
                 {&x},
                 fixed(detail::rotary_rule()),
                 x.shape(),
                 [theta](const Locals& l, const Specs& s, const DTensorSpec&) {
                   // Sharded T: its rows; under context parallelism, their global positions.
                   const int64_t first = Box::local(*s[0]).offsets[2];
                   return kernels::rotary(
                       l[0], theta,
                       sequence_positions(first, l[0].size(2), s[0]->shape[2], l[0].device()));
                 }});
}

DTensor repeat_heads(const DTensor& x, int64_t times) {
  VS_CHECK(x.ndim() == 4 && times >= 1, "[dtensor] repeat_heads: x must be [B, H, T, D]");
  if (times == 1) return x;
  std::vector<int64_t> shape = x.shape();
  const int64_t heads = shape[1];
  shape[1] *= times;
  return run_op({"repeat_heads",
                 {&x},
                 [heads](int64_t mesh_size) { return detail::repeat_heads_rule(heads, mesh_size); },
                 shape,
                 [times](const Locals& l, const Specs&, const DTensorSpec&) {
                   return at::repeat_interleave(l[0], times, 1);
                 }});
}

DTensor softmax(const DTensor& x, int64_t dim) {
  return run_op({"softmax",
                 {&x},
                 fixed(detail::softmax_rule(x.ndim(), dim)),
                 x.shape(),
                 [dim](const Locals& l, const Specs&, const DTensorSpec&) {
                   return at::softmax(l[0], dim);
                 }});
}

DTensor causal_attention(const DTensor& q, const DTensor& k, const DTensor& v) {
  VS_CHECK(q.ndim() == 4 && q.shape() == k.shape() && q.shape() == v.shape(),
           "[dtensor] causal_attention: q, k, v must share one [B, H, T, D] shape");
  return run_op(
      {"causal_attention",
       {&q, &k, &v},
       fixed(detail::attention_rule()),
       q.shape(),
       [](const Locals& l, const Specs&, const DTensorSpec&) {
         // The first attention path that holds (NOTE [Kernel table]): generation's KV cache
         // (NOTE [KV cache]), context parallelism's ring (on any device: the kernels after it
         // would see this rank's tokens only), then the local kernels.
         KvCache* cache = KvCacheScope::cache();
         const comm::Group* ring = ContextParallelScope::ring();
         kernels::KernelContext context{l[0].device(), l[0].scalar_type()};
         context.kv_cache = cache != nullptr;
         context.cp_ring = ring != nullptr;
         const kernels::AttentionPath& path = kernels::take(kernels::kAttentionPaths, context);
         switch (path.id) {
           case kernels::AttentionPathId::kKvCache:
             return cache->attend(l[0], l[1], l[2]);
           case kernels::AttentionPathId::kCpRing:
             return ring_causal_attention(l[0], l[1], l[2], *ring);
           case kernels::AttentionPathId::kFused:  // keeps no probabilities: nothing to recompute
             return path.run(l[0], l[1], l[2]);
           case kernels::AttentionPathId::kBlocked:
           case kernels::AttentionPathId::kExplicit:
             break;
         }
         auto core = [run = path.run](const std::vector<at::Tensor>& qkv) {
           return std::vector<at::Tensor>{run(qkv[0], qkv[1], qkv[2])};
         };
         // Selective activation checkpointing: keep q, k, v, not the probabilities.
         if (RecomputeAttentionScope::active())
           return recompute_in_backward(core, {l[0], l[1], l[2]}, "AttentionRecompute").at(0);
         return core({l[0], l[1], l[2]}).at(0);
       }});
}

DTensor embedding(const DTensor& ids, const DTensor& weight) {
  VS_CHECK(weight.ndim() == 2, "[dtensor] embedding: weight must be 2-D");
  const int64_t vocab = weight.size(0);
  return run_op({"embedding",
                 {&ids, &weight},
                 fixed(detail::embedding_rule(ids.ndim())),
                 shape_of(ids.shape(), 0, {weight.size(1)}),
                 [vocab](const Locals& l, const Specs& s, const DTensorSpec&) {
                   const at::Tensor& rows = l[1];
                   if (rows.size(0) == vocab) return at::embedding(rows, l[0]);
                   // Vocab-parallel: look up the ids this rank holds; the others contribute 0.
                   const int64_t offset = s[1]->local_offset()[0];
                   std::vector<int64_t> shape = l[0].sizes().vec();
                   shape.push_back(rows.size(1));
                   if (rows.size(0) == 0) return at::zeros(shape, rows.options()) + rows.sum();
                   at::Tensor mine = (l[0] >= offset) & (l[0] < offset + rows.size(0));
                   at::Tensor local_ids = (l[0] - offset).clamp(0, rows.size(0) - 1);
                   return at::embedding(rows, local_ids) *
                          mine.unsqueeze(-1).to(rows.scalar_type());
                 }});
}

DTensor cross_entropy(const DTensor& logits, const DTensor& targets, double normalizer) {
  VS_CHECK(logits.ndim() == 2 && targets.ndim() == 1 && targets.size(0) == logits.size(0),
           "[dtensor] cross_entropy: logits [N, V] and targets [N], got [{}] and [{}]",
           fmt::join(logits.shape(), ", "), fmt::join(targets.shape(), ", "));
  const bool masked = normalizer > 0;
  const double n_global = masked ? normalizer : static_cast<double>(logits.size(0));
  return run_op(
      {"cross_entropy",
       {&logits, &targets},
       fixed(detail::cross_entropy_rule()),
       {},
       [n_global, masked](const Locals& l, const Specs& s, const DTensorSpec&) {
         const at::Tensor& x = l[0];
         const at::Tensor& t = l[1];
         const std::vector<int> vocab_dims = s[0]->mesh_dims_sharding(1);
         if (vocab_dims.empty()) {
           // ATen skips kIgnoreTarget, its ignore_index.
           return at::cross_entropy_loss(x, t, {}, at::Reduction::Sum, kIgnoreTarget) / n_global;
         }
         // NOTE [Vocab-parallel cross entropy]: the max is only for stability (it cancels
         // exactly), so it needs no gradient; the sum of exponentials and the target logit are
         // partial sums over the vocab shards, reduced with autograd (their backward is the
         // identity).
         const DeviceMesh& mesh = s[0]->mesh;
         at::Tensor max = std::get<0>(x.detach().max(-1, true));
         for (int i : vocab_dims)
           mesh.group(i).all_reduce(max, comm::ReduceOp::kMax);
         at::Tensor z = x - max;
         at::Tensor sum_exp = z.exp().sum(-1);
         const int64_t offset = s[0]->local_offset()[1];
         const int64_t width = x.size(1);
         // A rank whose slice holds only vocabulary padding has z = -inf there: the target
         // logit is selected (where), never multiplied by 0, which would make -inf * 0 = NaN.
         at::Tensor mine = (t >= offset) & (t < offset + width);
         at::Tensor target_logit =
             width == 0
                 ? z.sum(-1) * 0
                 : at::where(mine,
                             z.gather(1, (t - offset).clamp(0, width - 1).unsqueeze(1)).squeeze(1),
                             at::zeros({}, z.options()));
         for (int i : vocab_dims) {
           sum_exp = detail::reduce_partial(sum_exp, mesh.group(i), comm::ReduceOp::kSum);
           target_logit = detail::reduce_partial(target_logit, mesh.group(i), comm::ReduceOp::kSum);
         }
         const at::Tensor rows = sum_exp.log() - target_logit;
         if (masked) return (rows * (t != kIgnoreTarget).to(rows.scalar_type())).sum() / n_global;
         return rows.sum() / n_global;
       }});
}

DTensor linear_cross_entropy(const DTensor& x, const DTensor& w, const DTensor& targets,
                             int64_t classes, double normalizer) {
  VS_CHECK(x.ndim() == 2 && w.ndim() == 2 && targets.ndim() == 1 && x.size(1) == w.size(1) &&
               targets.size(0) == x.size(0) && 0 < classes && classes <= w.size(0),
           "[dtensor] linear_cross_entropy: x [N, C], w [V, C], targets [N] and 0 < classes <= V, "
           "got [{}], [{}], [{}] and {}",
           fmt::join(x.shape(), ", "), fmt::join(w.shape(), ", "), fmt::join(targets.shape(), ", "),
           classes);
  const bool masked = normalizer > 0;
  const double n_global = masked ? normalizer : static_cast<double>(x.size(0));
  return run_op({"linear_cross_entropy",
                 {&x, &w, &targets},
                 fixed(detail::linear_cross_entropy_rule()),
                 {},
                 [n_global, classes, masked](const Locals& l, const Specs& s, const DTensorSpec&) {
                   local::VocabSlice vocab;
                   vocab.offset = s[1]->local_offset()[0];
                   vocab.real = std::clamp<int64_t>(classes - vocab.offset, 0, l[1].size(0));
                   for (int i : s[1]->mesh_dims_sharding(0))
                     vocab.groups.push_back(&s[1]->mesh.group(i));
                   return local::linear_cross_entropy(l[0], l[1], l[2], vocab, n_global, 0,
                                                      std::nullopt, masked);
                 }});
}

DTensor reshape(const DTensor& x, std::vector<int64_t> shape) {
  const int64_t numel = c10::multiply_integers(x.shape());
  int64_t known = 1, infer = -1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == -1) {
      infer = static_cast<int64_t>(d);
    } else {
      known *= shape[d];
    }
  }
  if (infer >= 0 && known > 0) shape[infer] = numel / known;
  VS_CHECK(c10::multiply_integers(shape) == numel,
           "[dtensor] reshape of [{}] to [{}]: sizes differ", fmt::join(x.shape(), ", "),
           fmt::join(shape, ", "));
  const std::vector<int64_t> from = x.shape();
  return run_op(
      {"reshape",
       {&x},
       [from, shape](int64_t mesh_size) { return detail::reshape_rule(from, shape, mesh_size); },
       shape,
       [](const Locals& l, const Specs&, const DTensorSpec& out) {
         return l[0].reshape(out.local_shape());
       }});
}

DTensor transpose(const DTensor& x, int64_t d0, int64_t d1) {
  std::vector<int64_t> shape = x.shape();
  const int64_t a = d0 < 0 ? d0 + x.ndim() : d0, b = d1 < 0 ? d1 + x.ndim() : d1;
  std::swap(shape[a], shape[b]);
  return run_op(
      {"transpose",
       {&x},
       fixed(detail::transpose_rule(x.ndim(), a, b)),
       shape,
       [a, b](const Locals& l, const Specs&, const DTensorSpec&) { return l[0].transpose(a, b); }});
}

DTensor sum(const DTensor& x, std::vector<int64_t> dims, bool keepdim) {
  for (auto& d : dims)
    d = d < 0 ? d + x.ndim() : d;
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < x.ndim(); ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!reduced) shape.push_back(x.size(d));
    if (reduced && keepdim) shape.push_back(1);
  }
  return run_op({"sum",
                 {&x},
                 fixed(detail::sum_rule(x.ndim(), dims, keepdim)),
                 shape,
                 [dims, keepdim](const Locals& l, const Specs&, const DTensorSpec&) {
                   return at::sum(l[0], dims, keepdim);
                 }});
}

DTensor mean(const DTensor& x) {
  std::vector<int64_t> all(x.ndim());
  std::iota(all.begin(), all.end(), 0);
  const double count = static_cast<double>(c10::multiply_integers(x.shape()));
  return run_op(
      {"mean",
       {&x},
       fixed(detail::sum_rule(x.ndim(), all, false)),
       {},
       [count](const Locals& l, const Specs&, const DTensorSpec&) { return l[0].sum() / count; }});
}

}  // namespace vescale::ops
