#include "mesh/job_mesh.h"

#include <c10/util/accumulate.h>

#include <algorithm>

#include "core/error.h"

namespace vescale {

namespace {

MeshSpec spec_of(const MeshDims& dims) {
  MeshSpec spec;
  for (const MeshDim& d : dims) {
    spec.shape.push_back(d.size);
    spec.dim_names.push_back(d.name);
  }
  return spec;
}

}  // namespace

JobMesh::JobMesh(DeviceMesh mesh, MeshDims dims)
    : dims_(std::move(dims)),
      mesh_(std::move(mesh)),
      param_mesh_(mesh_.sub(dims_with_role(dims_, DimRole::kTensor))) {}

JobMesh::JobMesh(const comm::Group& world, const MeshDims& dims)
    : JobMesh(DeviceMesh(world, spec_of(dims)), dims) {
  const std::vector<std::string> names = replica_dims();
  if (names.size() < 2) return;
  // One line per coordinate on the other dims, walking the replica dims row-major (dp-major).
  std::vector<int> along;
  for (const auto& name : names)
    along.push_back(mesh_.dim_index(name));
  const std::vector<int64_t> sizes = replica_sizes();
  const int64_t count = c10::multiply_integers(sizes);
  std::vector<std::vector<int>> lines;
  for (int r = 0; r < world.size(); ++r) {
    std::vector<int64_t> coord = mesh_.coordinate_of(r);
    if (std::any_of(along.begin(), along.end(), [&](int d) { return coord[d] != 0; })) continue;
    std::vector<int> line;
    for (int64_t i = 0; i < count; ++i) {
      int64_t rest = i;
      for (size_t k = along.size(); k-- > 0;) {
        coord[along[k]] = rest % sizes[k];
        rest /= sizes[k];
      }
      line.push_back(mesh_.rank_at(coord));
    }
    lines.push_back(std::move(line));
  }
  replicas_ = world.split(lines, "dp");
}

JobMesh JobMesh::layout(const MeshDims& dims, int world_rank) {
  return JobMesh(DeviceMesh::layout(spec_of(dims), world_rank), dims);
}

JobMesh::JobMesh(const comm::Group& world, int64_t pp, int64_t dp, int64_t tp)
    : JobMesh(world, job_mesh_dims(pp, dp, 1, {tp})) {}

JobMesh::JobMesh(const comm::Group& world, int64_t pp, int64_t dp,
                 const std::vector<int64_t>& tp_dims)
    : JobMesh(world, job_mesh_dims(pp, dp, 1, tp_dims)) {}

JobMesh JobMesh::layout(int64_t pp, int64_t dp, int64_t tp, int world_rank) {
  return layout(job_mesh_dims(pp, dp, 1, {tp}), world_rank);
}

JobMesh JobMesh::layout(int64_t pp, int64_t dp, const std::vector<int64_t>& tp_dims,
                        int world_rank) {
  return layout(job_mesh_dims(pp, dp, 1, tp_dims), world_rank);
}

std::vector<std::string> JobMesh::replica_dims() const {
  std::vector<std::string> names;
  for (const MeshDim& d : dims_) {
    if (d.role == DimRole::kData || d.role == DimRole::kContext) names.push_back(d.name);
  }
  return names;
}

std::vector<int64_t> JobMesh::replica_sizes() const {
  std::vector<int64_t> sizes;
  for (const auto& name : replica_dims())
    sizes.push_back(mesh_.size(name));
  return sizes;
}

int64_t JobMesh::tp_rank() const {
  // A piece split over none of the tp dims has one replica per tp rank, numbered row-major.
  return param_mesh_.replica({}).index;
}

int64_t JobMesh::coordinate(const std::string& dim) const {
  return mesh_.coordinate()[mesh_.dim_index(dim)];
}

comm::Group JobMesh::pp_subgroup(const std::vector<int>& members, const std::string& label) const {
  std::vector<std::vector<int>> partition{members};
  for (int r = 0; r < static_cast<int>(pp()); ++r) {
    if (std::find(members.begin(), members.end(), r) == members.end()) partition.push_back({r});
  }
  return group("pp").split(partition, label);
}

std::vector<int> JobMesh::param_mesh_dims() const {
  std::vector<int> dims;
  for (const auto& name : param_mesh_.dim_names())
    dims.push_back(mesh_.dim_index(name));
  return dims;
}

std::vector<int> JobMesh::split_dims(const std::vector<bool>& param_mesh_sharded,
                                     const std::vector<std::string>& extra) const {
  const std::vector<int> param_dims = param_mesh_dims();
  VS_CHECK(param_mesh_sharded.size() == param_dims.size(),
           "[mesh] {} flags for a {}-D parameter mesh", param_mesh_sharded.size(),
           param_dims.size());
  std::vector<int> dims;
  for (size_t i = 0; i < param_dims.size(); ++i) {
    if (param_mesh_sharded[i]) dims.push_back(param_dims[i]);
  }
  for (const auto& name : extra)
    dims.push_back(mesh_.dim_index(name));
  std::sort(dims.begin(), dims.end());
  dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
  return dims;
}

std::vector<int> JobMesh::replicated_dims(const std::vector<int>& split) const {
  std::vector<int> dims;
  for (int i = 0; i < mesh_.ndim(); ++i) {
    if (std::find(split.begin(), split.end(), i) == split.end()) dims.push_back(i);
  }
  return dims;
}

}  // namespace vescale
