#include "dtensor/sharding_rules.h"

#include "core/error.h"

namespace vescale::detail {
namespace {

const Placement kR = Placement::replicate();
const Placement kP = Placement::partial();

DimStrategy all_replicate(size_t inputs, bool fallback = true) {
  return {Placements(inputs, kR), kR, fallback};
}

bool all_r(const Placements& in) {
  return std::all_of(in.begin(), in.end(), [](const Placement& p) { return p.is_replicate(); });
}

bool is_sum(const Placement& p) {
  return p.is_partial() && p.reduce == comm::ReduceOp::kSum;
}

}  // namespace

DimRule elementwise_rule(std::vector<std::vector<int64_t>> input_shapes,
                         std::vector<int64_t> output_shape, PartialPolicy policy) {
  return [input_shapes, output_shape, policy](const Placements& in) -> DimStrategy {
    const size_t n = in.size();
    const int64_t out_ndim = static_cast<int64_t>(output_shape.size());
    if (all_r(in)) return all_replicate(n, false);
    // A shard: the first sharded input decides the output dim.
    for (size_t j = 0; j < n; ++j) {
      if (!in[j].is_shard()) continue;
      const int64_t o = in[j].dim + out_ndim - static_cast<int64_t>(input_shapes[j].size());
      DimStrategy s{Placements(n, kR), Placement::shard(o)};
      for (size_t k = 0; k < n; ++k) {
        const int64_t dk = o - (out_ndim - static_cast<int64_t>(input_shapes[k].size()));
        const bool has_dim = dk >= 0 && input_shapes[k][dk] == output_shape[o];
        if (has_dim) s.inputs[k] = Placement::shard(dk);
      }
      return s;
    }
    // Partials (and Replicates).
    int partials = 0;
    bool sums = true;
    for (const auto& p : in) {
      if (p.is_partial()) {
        ++partials;
        sums = sums && is_sum(p);
      }
    }
    if (sums && policy == PartialPolicy::kAll && partials == static_cast<int>(n)) {
      return {Placements(n, kP), kP};
    }
    if (sums && partials == 1 &&
        (policy == PartialPolicy::kOneAny ||
         (policy == PartialPolicy::kOneFirst && in[0].is_partial()))) {
      return {in, kP};
    }
    return all_replicate(n);
  };
}

DimRule linear_rule(int64_t x_ndim) {
  return [x_ndim](const Placements& in) -> DimStrategy {
    const Placement& x = in[0];
    const Placement w = in[1].is_partial() ? kR : in[1];
    const int64_t last = x_ndim - 1;
    if (w.is_shard(0)) return {{kR, w, Placement::shard(0)}, Placement::shard(last)};  // column
    if (w.is_shard(1) || x.is_shard(last)) {
      return {{Placement::shard(last), Placement::shard(1), kP}, kP};  // row
    }
    if (x.is_shard()) return {{x, kR, kR}, x};  // batch / sequence
    if (is_sum(x)) return {{x, kR, kP}, kP};
    return all_replicate(3, !x.is_replicate() || !in[1].is_replicate());
  };
}

DimRule linear_group_rule(int64_t x_ndim, size_t weights, bool bias) {
  const DimRule one = linear_rule(x_ndim);
  return [one, weights, bias](const Placements& in) -> DimStrategy {
    const DimStrategy s = one({in[0], in[1], bias ? in[1 + weights] : kR});
    DimStrategy out{{s.inputs[0]}, s.output, s.fallback};
    for (size_t i = 0; i < weights; ++i)
      out.inputs.push_back(s.inputs[1]);
    for (size_t i = 0; i < (bias ? weights : 1); ++i)
      out.inputs.push_back(s.inputs[2]);
    return out;
  };
}

DimRule matmul_rule(int64_t a_ndim, int64_t b_ndim) {
  return [a_ndim, b_ndim](const Placements& in) -> DimStrategy {
    const Placement& a = in[0];
    const Placement& b = in[1];
    const int64_t out_ndim = std::max(a_ndim, b_ndim);
    const int64_t am = a_ndim - 2, ak = a_ndim - 1, bk = b_ndim - 2, bn = b_ndim - 1;
    if (a.is_shard() && a.dim < am) {  // batch dim
      const int64_t o = a.dim + out_ndim - a_ndim;
      const int64_t db = o - (out_ndim - b_ndim);
      return {{a, db >= 0 ? Placement::shard(db) : kR}, Placement::shard(o)};
    }
    if (b.is_shard() && b.dim < bk) {
      const int64_t o = b.dim + out_ndim - b_ndim;
      const int64_t da = o - (out_ndim - a_ndim);
      return {{da >= 0 ? Placement::shard(da) : kR, b}, Placement::shard(o)};
    }
    if (a.is_shard(am)) return {{a, kR}, Placement::shard(out_ndim - 2)};
    if (b.is_shard(bn)) return {{kR, b}, Placement::shard(out_ndim - 1)};
    if (a.is_shard(ak) || b.is_shard(bk)) return {{Placement::shard(ak), Placement::shard(bk)}, kP};
    if (is_sum(a) && b.is_replicate()) return {{a, kR}, kP};
    if (a.is_replicate() && is_sum(b)) return {{kR, b}, kP};
    return all_replicate(2, !all_r(in));
  };
}

DimRule norm_rule(int64_t x_ndim, size_t params) {
  return [x_ndim, params](const Placements& in) -> DimStrategy {
    const Placement& x = in[0];
    if (x.is_shard() && x.dim != x_ndim - 1) {
      Placements inputs(params + 1, kR);
      inputs[0] = x;
      return {inputs, x};
    }
    return all_replicate(params + 1, !all_r(in));
  };
}

DimRule rotary_rule() {
  return [](const Placements& in) -> DimStrategy {
    const Placement& x = in[0];
    if ((x.is_shard() && x.dim != 3) || is_sum(x)) return {{x}, x};
    return all_replicate(1, !x.is_replicate());
  };
}

DimRule repeat_heads_rule(int64_t heads, int64_t mesh_size) {
  return [heads, mesh_size](const Placements& in) -> DimStrategy {
    const Placement& x = in[0];
    const bool even = heads % mesh_size == 0;
    if ((x.is_shard() && (x.dim != 1 || even)) || is_sum(x)) return {{x}, x};
    return all_replicate(1, !x.is_replicate());
  };
}

DimRule softmax_rule(int64_t x_ndim, int64_t dim) {
  const int64_t d = dim < 0 ? dim + x_ndim : dim;
  return [d](const Placements& in) -> DimStrategy {
    if (in[0].is_shard() && in[0].dim != d) return {{in[0]}, in[0]};
    return all_replicate(1, !all_r(in));
  };
}

DimRule attention_rule() {
  return [](const Placements& in) -> DimStrategy {
    for (const auto& p : in) {
      if (p.is_shard(0) || p.is_shard(1)) return {{p, p, p}, p};
    }
    return all_replicate(3, !all_r(in));
  };
}

DimRule moe_experts_rule(int64_t inputs) {
  return [inputs](const Placements& in) -> DimStrategy {
    // Each row is routed and computed on its own: row shards pass; the weights Replicate.
    if (in[0].is_shard(0)) {
      Placements want(static_cast<size_t>(inputs), kR);
      want[0] = want[1] = in[0];
      return {want, in[0]};
    }
    return all_replicate(static_cast<size_t>(inputs), !all_r(in));
  };
}

DimRule embedding_rule(int64_t ids_ndim) {
  return [ids_ndim](const Placements& in) -> DimStrategy {
    const Placement& ids = in[0];
    const Placement& w = in[1];
    if (w.is_shard(0)) return {{kR, w}, kP};                          // vocab-parallel
    if (w.is_shard(1)) return {{kR, w}, Placement::shard(ids_ndim)};  // hidden-parallel
    if (ids.is_shard()) return {{ids, kR}, ids};                      // batch / sequence
    return all_replicate(2, !all_r(in));
  };
}

DimRule cross_entropy_rule() {
  return [](const Placements& in) -> DimStrategy {
    const Placement& logits = in[0];
    if (logits.is_shard(0)) return {{logits, Placement::shard(0)}, kP};  // rows
    if (logits.is_shard(1)) return {{logits, kR}, kR};                   // vocab-parallel
    return all_replicate(2, !all_r(in));
  };
}

DimRule linear_cross_entropy_rule() {
  return [](const Placements& in) -> DimStrategy {
    const Placement& x = in[0];
    const Placement& w = in[1];
    if (w.is_shard(0)) return {{kR, w, kR}, kR};                                    // vocab
    if (x.is_shard(0) && !w.is_shard()) return {{x, kR, Placement::shard(0)}, kP};  // rows
    return all_replicate(3, !all_r(in));
  };
}

DimRule transpose_rule(int64_t ndim, int64_t d0, int64_t d1) {
  d0 = d0 < 0 ? d0 + ndim : d0;
  d1 = d1 < 0 ? d1 + ndim : d1;
  return [d0, d1](const Placements& in) -> DimStrategy {
    const Placement& x = in[0];
    if (!x.is_shard()) return {{x}, x};
    const int64_t d = x.dim == d0 ? d1 : (x.dim == d1 ? d0 : x.dim);
    return {{x}, Placement::shard(d)};
  };
}

DimRule sum_rule(int64_t ndim, std::vector<int64_t> dims, bool keepdim) {
  for (auto& d : dims)
    d = d < 0 ? d + ndim : d;
  return [dims, keepdim](const Placements& in) -> DimStrategy {
    const Placement& x = in[0];
    if (x.is_partial()) return {{x}, is_sum(x) ? x : kR, false};
    if (!x.is_shard()) return {{x}, x};
    if (std::find(dims.begin(), dims.end(), x.dim) != dims.end()) return {{x}, kP};
    int64_t out = x.dim;
    if (!keepdim) {
      for (int64_t d : dims)
        out -= d < x.dim;
    }
    return {{x}, Placement::shard(out)};
  };
}

DimRule reshape_rule(std::vector<int64_t> from, std::vector<int64_t> to, int64_t mesh_size) {
  return [from, to, mesh_size](const Placements& in) -> DimStrategy {
    const Placement& x = in[0];
    if (!x.is_shard()) return {{x}, x};
    // Walk both shapes in groups whose products match; find the group of the sharded dim.
    size_t i = 0, j = 0;
    while (i < from.size() || j < to.size()) {
      const size_t i0 = i, j0 = j;
      int64_t a = i < from.size() ? from[i++] : 1;
      int64_t b = j < to.size() ? to[j++] : 1;
      while (a != b) {
        if (a < b && i < from.size()) {
          a *= from[i++];
        } else if (b < a && j < to.size()) {
          b *= to[j++];
        } else {
          break;
        }
      }
      if (x.dim < static_cast<int64_t>(i0) || x.dim >= static_cast<int64_t>(i)) continue;
      // The shard must be the outer dim of its group, and land on the group's outer dim.
      const bool whole = i - i0 == 1 && j - j0 == 1;
      const bool outer = x.dim == static_cast<int64_t>(i0) && j > j0;
      if (whole) return {{x}, Placement::shard(static_cast<int64_t>(j0))};
      if (outer && from[i0] % mesh_size == 0 && to[j0] % mesh_size == 0) {
        return {{x}, Placement::shard(static_cast<int64_t>(j0))};
      }
      break;
    }
    return all_replicate(1);
  };
}

}  // namespace vescale::detail
