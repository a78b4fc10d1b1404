#include "mesh/job_mesh.h"

#include <algorithm>

#include "core/error.h"

namespace vescale {

namespace {

std::vector<std::string> tp_dim_names(size_t tp_ndim) {
  VS_CHECK(tp_ndim == 1 || tp_ndim == 2, "[mesh] a tp mesh has 1 or 2 dims, not {}", tp_ndim);
  return tp_ndim == 1 ? std::vector<std::string>{"tp"} : std::vector<std::string>{"tp_a", "tp_b"};
}

MeshSpec job_mesh_spec(int64_t pp, int64_t dp, const std::vector<int64_t>& tp_dims) {
  std::vector<int64_t> shape{pp, dp};
  shape.insert(shape.end(), tp_dims.begin(), tp_dims.end());
  return MeshSpec{shape, JobMesh::dim_names(tp_dims.size())};
}

}  // namespace

std::vector<std::string> JobMesh::dim_names(size_t tp_ndim) {
  std::vector<std::string> names{"pp", "dp"};
  for (auto& name : tp_dim_names(tp_ndim))
    names.push_back(std::move(name));
  return names;
}

JobMesh::JobMesh(DeviceMesh mesh)
    : mesh_(std::move(mesh)),
      param_mesh_(mesh_.sub(tp_dim_names(static_cast<size_t>(mesh_.ndim() - 2)))) {}

JobMesh::JobMesh(const comm::Group& world, int64_t pp, int64_t dp, int64_t tp)
    : JobMesh(world, pp, dp, std::vector<int64_t>{tp}) {}

JobMesh::JobMesh(const comm::Group& world, int64_t pp, int64_t dp,
                 const std::vector<int64_t>& tp_dims)
    : JobMesh(DeviceMesh(world, job_mesh_spec(pp, dp, tp_dims))) {}

JobMesh JobMesh::layout(int64_t pp, int64_t dp, int64_t tp, int world_rank) {
  return layout(pp, dp, std::vector<int64_t>{tp}, world_rank);
}

JobMesh JobMesh::layout(int64_t pp, int64_t dp, const std::vector<int64_t>& tp_dims,
                        int world_rank) {
  return JobMesh(DeviceMesh::layout(job_mesh_spec(pp, dp, tp_dims), world_rank));
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
