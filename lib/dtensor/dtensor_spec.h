// DTensorSpec: one logical tensor spread over a mesh: its global shape and one placement per
// mesh dim. Sharding splits a dim like torch.chunk; a dim sharded over several mesh dims is split
// by the outer mesh dim first, then each piece by the inner ones.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dtensor/placement.h"
#include "mesh/device_mesh.h"

namespace vescale {

struct DTensorSpec;

/// The region of a tensor of global `shape` that one rank holds: extents and offsets per dim.
struct Box {
  std::vector<int64_t> shape;  ///< global
  std::vector<int64_t> sizes;
  std::vector<int64_t> offsets;
  /// The whole tensor.
  static Box whole(std::vector<int64_t> shape);
  /// This rank's piece under a spec (Partial dims hold the whole).
  static Box local(const DTensorSpec& spec);
};

struct DTensorSpec {
  DeviceMesh mesh;
  Placements placements;       ///< one per mesh dim; shard dims non-negative
  std::vector<int64_t> shape;  ///< global shape

  /// Checks the placements against the mesh and shape; normalizes negative shard dims.
  DTensorSpec(DeviceMesh mesh, Placements placements, std::vector<int64_t> shape);

  int64_t ndim() const { return static_cast<int64_t>(shape.size()); }
  /// The piece at a mesh coordinate (Box::local: this rank's).
  Box local_box(const std::vector<int64_t>& coordinate) const;
  /// Box::local(*this).sizes and .offsets.
  std::vector<int64_t> local_shape() const;
  std::vector<int64_t> local_offset() const;
  /// Extents along `tensor_dim` of the pieces held by the ranks of mesh dim `mesh_dim`'s group
  /// when mesh dim `mesh_dim` is Shard(tensor_dim) and the other mesh dims are as in this spec.
  std::vector<int64_t> group_piece_sizes(int mesh_dim, int64_t tensor_dim) const;

  bool has_partial() const;
  /// Mesh dims that shard `tensor_dim`, outer first.
  std::vector<int> mesh_dims_sharding(int64_t tensor_dim) const;
  /// Mesh dims that split the tensor (Shard placements); the others hold replicas or partials.
  std::vector<int> split_dims() const;
  /// The same tensor on `mesh`, a mesh that has every dim of this spec's mesh (by name) and
  /// more: Replicate on the dims this spec's mesh lacks (a tp-mesh parameter on the job mesh).
  DTensorSpec on_mesh(const DeviceMesh& mesh) const;
  DTensorSpec with_placements(Placements placements) const;
  DTensorSpec with_shape(std::vector<int64_t> shape) const;

  /// "[S(0), R] of 8x4 on DeviceMesh(dp=2, tp=2)".
  std::string str() const;
};

}  // namespace vescale
