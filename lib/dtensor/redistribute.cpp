#include "dtensor/redistribute.h"

#include <optional>

#include "core/error.h"
#include "core/logging.h"
#include "dtensor/transitions.h"

namespace vescale {
namespace {

/// Whether `from -> to` on one mesh dim is a single collective.
bool is_direct(const Placement& from, const Placement& to) {
  if (from.is_shard()) return to.is_replicate() || to.is_shard();
  if (from.is_replicate()) return true;
  // Partial
  if (to.is_replicate()) return true;
  if (to.is_shard()) return from.reduce != comm::ReduceOp::kMax;
  return false;  // P(x) -> P(y): through R
}

/// Lower first: moves that shrink or keep the local tensor before those that grow it.
int cost_class(const Placement& from, const Placement& to) {
  if (from.is_replicate()) return 0;                 // R->S, R->P: local, free
  if (from.is_partial() && to.is_shard()) return 1;  // reduce-scatter
  if (from.is_shard() && to.is_shard()) return 1;    // all-to-all
  if (from.is_partial()) return 2;                   // all-reduce
  return 3;                                          // all-gather
}

/// A move at mesh dim i is legal when no inner mesh dim shards the tensor dims it touches (the
/// inner pieces would not be contiguous), and when sharding does not block a pending move of an
/// outer mesh dim on the same tensor dim.
bool is_legal(const Placements& cur, const Placements& dst, int i, const Placement& to) {
  const int ndim = static_cast<int>(cur.size());
  auto inner_shards = [&](int64_t d) {
    for (int j = i + 1; j < ndim; ++j) {
      if (cur[j].is_shard(d)) return true;
    }
    return false;
  };
  auto outer_pending = [&](int64_t d) {
    for (int j = 0; j < i; ++j) {
      if ((cur[j].is_shard(d) || dst[j].is_shard(d)) && cur[j] != dst[j]) return true;
    }
    return false;
  };
  if (cur[i].is_shard() && inner_shards(cur[i].dim)) return false;
  if (to.is_shard() && (inner_shards(to.dim) || outer_pending(to.dim))) return false;
  return true;
}

}  // namespace

std::vector<RedistributeStep> plan_redistribute(const DTensorSpec& from, const Placements& to_raw) {
  const int ndim = from.mesh.ndim();
  VS_CHECK(static_cast<int>(to_raw.size()) == ndim, "[dtensor] {} placements for a {}-D mesh",
           to_raw.size(), ndim);
  Placements dst;
  for (const auto& p : to_raw)
    dst.push_back(p.normalized(from.ndim()));
  for (const auto& p : dst) {
    VS_CHECK(!p.is_shard() || p.dim < from.ndim(), "[dtensor] {} does not fit {}", p.str(),
             from.str());
  }
  Placements cur = from.placements;
  std::vector<RedistributeStep> steps;
  for (int guard = 0; cur != dst; ++guard) {
    VS_CHECK(guard < 8 * ndim + 8, "[dtensor] no redistribution plan from {} to {}",
             placements_str(from.placements), placements_str(dst));
    std::optional<RedistributeStep> best;
    std::pair<int, int> best_key{};
    for (int i = 0; i < ndim; ++i) {
      if (cur[i] == dst[i]) continue;
      const Placement to = is_direct(cur[i], dst[i]) ? dst[i] : Placement::replicate();
      if (!is_legal(cur, dst, i, to)) continue;
      const int cls = cost_class(cur[i], to);
      const std::pair<int, int> key{cls, cls == 3 ? -i : i};  // gathers: inner first
      if (!best || key < best_key) {
        best = RedistributeStep{i, to};
        best_key = key;
      }
    }
    if (!best) {
      // Blocked by an inner shard of the same tensor dim: replicate the innermost such mesh dim.
      int blocker = -1;
      for (int i = 0; i < ndim && blocker < 0; ++i) {
        if (cur[i] == dst[i]) continue;
        for (int j = ndim - 1; j > i; --j) {
          const bool blocks =
              cur[j].is_shard() && ((cur[i].is_shard(cur[j].dim)) || (dst[i].is_shard(cur[j].dim)));
          if (blocks) {
            blocker = j;
            break;
          }
        }
      }
      VS_CHECK(blocker >= 0, "[dtensor] no redistribution plan from {} to {}",
               placements_str(from.placements), placements_str(dst));
      best = RedistributeStep{blocker, Placement::replicate()};
    }
    steps.push_back(*best);
    cur[best->mesh_dim] = best->to;
  }
  return steps;
}

at::Tensor redistribute_local(const at::Tensor& local, const DTensorSpec& from,
                              const Placements& to) {
  at::Tensor x = local;
  DTensorSpec cur = from;
  for (const auto& step : plan_redistribute(from, to)) {
    const int i = step.mesh_dim;
    const Placement& src = cur.placements[i];
    const Placement& dst = step.to;
    const comm::Group& group = cur.mesh.group(i);
    spdlog::trace("[dtensor] {} -> {} on mesh dim {}", src.str(), dst.str(),
                  cur.mesh.dim_names()[i]);
    if (src.is_shard() && dst.is_replicate()) {
      x = detail::gather_shards(x, group, src.dim, cur.group_piece_sizes(i, src.dim));
    } else if (src.is_shard() && dst.is_shard()) {
      x = detail::reshard(x, group, src.dim, cur.group_piece_sizes(i, src.dim), dst.dim,
                          cur.group_piece_sizes(i, dst.dim));
    } else if (src.is_replicate() && dst.is_shard()) {
      x = detail::take_shard(x, group, dst.dim, cur.group_piece_sizes(i, dst.dim));
    } else if (src.is_replicate() && dst.is_partial()) {
      x = detail::make_partial(x, group, dst.reduce);
    } else if (src.is_partial() && dst.is_replicate()) {
      x = detail::reduce_partial(x, group, src.reduce);
    } else if (src.is_partial() && dst.is_shard()) {
      x = detail::reduce_scatter_partial(x, group, dst.dim, cur.group_piece_sizes(i, dst.dim),
                                         src.reduce);
    } else {
      VS_CHECK(false, "[dtensor] no direct move {} -> {}", src.str(), dst.str());
    }
    Placements next = cur.placements;
    next[i] = dst;
    cur = cur.with_placements(next);
  }
  return x;
}

}  // namespace vescale
