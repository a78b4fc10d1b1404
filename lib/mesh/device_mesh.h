// DeviceMesh: the ranks of a job laid out as an n-D array with named dims (pp, dp, tp).
//
// Ranks are laid out row-major, outer dim first, so with the order pp, dp, tp the ranks of a TP
// group are neighbours. Each rank holds one group per dim: the ranks that share its coordinates on
// every other dim. Size-1 dims are real dims whose groups are free.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/group.h"

namespace vescale {

/// A mesh shape with dim names, e.g. parsed from "pp=1,dp=2,tp=2".
struct MeshSpec {
  std::vector<int64_t> shape;
  std::vector<std::string> dim_names;

  int64_t numel() const;
  /// "pp=1,dp=2,tp=2".
  std::string str() const;
  /// Parses "name=size,..."; throws UserError naming `what` on bad input.
  static MeshSpec parse(const std::string& text, const std::string& what = "--mesh");
};

/// Which copy of a piece of state a rank holds: the ranks that hold the same piece are `count`
/// replicas, numbered 0..count-1 by their coordinates on the dims that do not split it.
struct Replica {
  int64_t index = 0;
  int64_t count = 1;
};

class DeviceMesh {
 public:
  /// Builds the mesh and one group per dim and coordinate from the world group.
  /// *Collective* over `world`, whose size must equal the product of `spec.shape`.
  DeviceMesh(const comm::Group& world, const MeshSpec& spec);

  /// A layout-only mesh: shapes, coordinates and ranks as seen from `world_rank`, but no groups
  /// (for planning and dumps without processes: `plan show --tp 4`). Not collective.
  static DeviceMesh layout(const MeshSpec& spec, int world_rank);
  /// False for a layout-only mesh.
  bool has_groups() const;

  int ndim() const { return static_cast<int>(dims_.size()); }
  std::vector<int64_t> shape() const;
  std::vector<std::string> dim_names() const;
  /// Number of ranks in this (sub-)mesh.
  int64_t numel() const;
  /// Size of a dim, by name or index.
  int64_t size(const std::string& dim) const;
  int64_t size(int dim) const;
  /// Index of a named dim in this mesh; throws naming the dims that exist.
  int dim_index(const std::string& dim) const;
  bool has_dim(const std::string& dim) const;

  /// This process's rank in the world.
  int world_rank() const;
  /// This process's coordinate in this mesh.
  std::vector<int64_t> coordinate() const;
  /// Coordinate of a world rank that belongs to this mesh.
  std::vector<int64_t> coordinate_of(int world_rank) const;
  /// World rank at a coordinate of this mesh.
  int rank_at(const std::vector<int64_t>& coordinate) const;
  /// Whether a world rank belongs to this (sub-)mesh.
  bool contains(int world_rank) const;

  /// Which replica of its piece this rank holds, for a piece split over the mesh dims `split`
  /// (indices into this mesh) and replicated over the others.
  Replica replica(const std::vector<int>& split) const;

  /// The group of this rank along a dim (its label is the dim name).
  const comm::Group& group(const std::string& dim) const;
  const comm::Group& group(int dim) const;
  /// The world group the mesh was built from.
  const comm::Group& world() const;
  /// The device of this rank's tensors: the world group's (the CPU for a layout-only mesh).
  Device device() const;

  /// World rank of the neighbour `offset` steps along `dim` (e.g. -1: previous pipeline stage);
  /// nullopt past the edge unless `wrap`.
  std::optional<int> neighbor(const std::string& dim, int offset, bool wrap = false) const;

  /// The 1-D sub-mesh of this rank along `dim`: mesh["tp"].
  DeviceMesh operator[](const std::string& dim) const;
  /// The sub-mesh of this rank over several dims, in the given order of this mesh.
  DeviceMesh sub(const std::vector<std::string>& dims) const;

  /// "DeviceMesh(pp=1, dp=2, tp=2) rank 3 at (0, 1, 1)".
  std::string str() const;

  struct State;

 private:
  DeviceMesh(std::shared_ptr<const State> state, std::vector<int> dims);
  /// Coordinate along every dim of the full mesh.
  std::vector<int64_t> full_coordinate_of(int world_rank) const;
  int full_rank_at(const std::vector<int64_t>& coordinate) const;

  std::shared_ptr<const State> state_;
  std::vector<int> dims_;  // which dims of the full mesh this view spans
};

}  // namespace vescale
