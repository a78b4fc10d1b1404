// Placement: how a tensor lies along one mesh dim. Shard(d), Replicate(), Partial(sum|avg|max).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/reduce_op.h"

namespace vescale {

enum class PlacementKind { kShard, kReplicate, kPartial };

struct Placement {
  PlacementKind kind = PlacementKind::kReplicate;
  int64_t dim = 0;                               ///< tensor dim, for kShard (may be negative)
  comm::ReduceOp reduce = comm::ReduceOp::kSum;  ///< for kPartial

  static Placement shard(int64_t dim) { return {PlacementKind::kShard, dim, comm::ReduceOp::kSum}; }
  static Placement replicate() { return {}; }
  static Placement partial(comm::ReduceOp op = comm::ReduceOp::kSum) {
    return {PlacementKind::kPartial, 0, op};
  }

  bool is_shard() const { return kind == PlacementKind::kShard; }
  bool is_shard(int64_t d) const { return kind == PlacementKind::kShard && dim == d; }
  bool is_replicate() const { return kind == PlacementKind::kReplicate; }
  bool is_partial() const { return kind == PlacementKind::kPartial; }

  /// Shard dims counted from the end become non-negative for a tensor of `ndim` dims.
  Placement normalized(int64_t ndim) const;

  /// "S(0)", "S(-1)", "R", "P", "P(avg)", "P(max)".
  std::string str() const;
  /// Parses the forms of str() plus "P(sum)"; throws UserError naming `what` otherwise.
  static Placement parse(const std::string& text, const std::string& what = "placement");

  bool operator==(const Placement& other) const;
  bool operator!=(const Placement& other) const { return !(*this == other); }
};

using Placements = std::vector<Placement>;

/// Whether each placement shards its mesh dim, one flag per dim.
std::vector<bool> shard_flags(const Placements& placements);

/// "[S(0), R]".
std::string placements_str(const Placements& placements);
/// Parses "S(0),R" or "[S(0), R]".
Placements parse_placements(const std::string& text, const std::string& what = "placements");

}  // namespace vescale
