#include "mesh/job_mesh.h"

#include <c10/util/accumulate.h>

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

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
  build_groups(world);
}

std::vector<std::vector<int>> JobMesh::lines_along(const std::vector<std::string>& names) const {
  std::vector<int> along;
  std::vector<int64_t> sizes;
  for (const auto& name : names) {
    along.push_back(mesh_.dim_index(name));
    sizes.push_back(mesh_.size(name));
  }
  const int64_t count = c10::multiply_integers(sizes);
  std::vector<std::vector<int>> lines;
  for (int r = 0; r < static_cast<int>(mesh_.numel()); ++r) {
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
  return lines;
}

void JobMesh::build_groups(const comm::Group& world) {
  // Every set of two or more data dims, each in the order of the mesh: a parameter sharded over
  // some data dim averages over the rest (NOTE [Dims by role]).
  const std::vector<std::string> data = data_dims();
  for (size_t mask = 1; mask < (size_t{1} << data.size()); ++mask) {
    std::vector<std::string> names;
    for (size_t i = 0; i < data.size(); ++i)
      if (mask & (size_t{1} << i)) names.push_back(data[i]);
    if (names.size() < 2) continue;
    replica_groups_.emplace(names, world.split(lines_along(names), "dp"));
  }
  // The ep and cp groups when their ranks span more dims than the one of their name (ep carved
  // from dp and cp: NOTE [Expert parallelism]).
  for (const auto& [what, label] : {std::pair{&DimRoleRow::holds_experts, "ep"},
                                    std::pair{&DimRoleRow::splits_sequence, "cp"}}) {
    const std::vector<std::string> names = role_dims(what);
    if (size_along(names) == 1 || names == std::vector<std::string>{label}) continue;
    role_groups_.emplace(label, world.split(lines_along(names), label));
  }
}

JobMesh JobMesh::layout(const MeshDims& dims, int world_rank) {
  return JobMesh(DeviceMesh::layout(spec_of(dims), world_rank), dims);
}

JobMesh::JobMesh(const comm::Group& world, int64_t pp, int64_t dp, int64_t tp)
    : JobMesh(world, job_mesh_dims({{"pp", pp}, {"dp", dp}}, {tp})) {}

JobMesh::JobMesh(const comm::Group& world, int64_t pp, int64_t dp,
                 const std::vector<int64_t>& tp_dims)
    : JobMesh(world, job_mesh_dims({{"pp", pp}, {"dp", dp}}, tp_dims)) {}

JobMesh JobMesh::layout(int64_t pp, int64_t dp, int64_t tp, int world_rank) {
  return layout(job_mesh_dims({{"pp", pp}, {"dp", dp}}, {tp}), world_rank);
}

JobMesh JobMesh::layout(int64_t pp, int64_t dp, const std::vector<int64_t>& tp_dims,
                        int world_rank) {
  return layout(job_mesh_dims({{"pp", pp}, {"dp", dp}}, tp_dims), world_rank);
}

std::vector<std::string> JobMesh::data_dims() const {
  std::vector<std::string> names;
  for (const MeshDim& d : dims_)
    if (d.splits_data()) names.push_back(d.name);
  return names;
}

int64_t JobMesh::batch_shards() const {
  return size_along(role_dims(&DimRoleRow::splits_batch));
}

int64_t JobMesh::batch_rank() const {
  return index_along(role_dims(&DimRoleRow::splits_batch));
}

const comm::Group& JobMesh::replicas_of(const std::vector<std::string>& dims) const {
  VS_CHECK(!dims.empty(), "[mesh] no replica dims on {}", str());
  if (dims.size() == 1) return group(dims.front());
  const auto it = replica_groups_.find(dims);
  VS_CHECK(it != replica_groups_.end(), "[mesh] no replica group over {} on {}",
           fmt::join(dims, " x "), str());
  return it->second;
}

std::vector<std::string> JobMesh::role_dims(bool DimRoleRow::*what) const {
  std::vector<std::string> names;
  for (const MeshDim& d : dims_)
    if (d.row().*what) names.push_back(d.name);
  return names;
}

int64_t JobMesh::size_along(const std::vector<std::string>& names) const {
  int64_t n = 1;
  for (const auto& name : names)
    n *= mesh_.size(name);
  return n;
}

int64_t JobMesh::index_along(const std::vector<std::string>& names) const {
  int64_t index = 0;
  for (const auto& name : names)
    index = index * mesh_.size(name) + coordinate(name);
  return index;
}

const comm::Group& JobMesh::group_along(bool DimRoleRow::*what, const std::string& label) const {
  const std::vector<std::string> names = role_dims(what);
  VS_CHECK(size_along(names) > 1, "[mesh] no {} group on {}", label, str());
  if (names == std::vector<std::string>{label}) return group(label);
  return role_groups_.at(label);
}

const comm::Group& JobMesh::expert_group() const {
  return group_along(&DimRoleRow::holds_experts, "ep");
}

const comm::Group& JobMesh::sequence_group() const {
  return group_along(&DimRoleRow::splits_sequence, "cp");
}

std::vector<int> JobMesh::stage_dims() const {
  std::vector<int> out;
  for (const MeshDim& d : dims_)
    if (d.row().carries_stages && d.size > 1) out.push_back(mesh_.dim_index(d.name));
  return out;
}

std::vector<int> JobMesh::expert_dims() const {
  std::vector<int> out;
  for (const MeshDim& d : dims_)
    if (d.row().holds_experts && d.size > 1) out.push_back(mesh_.dim_index(d.name));
  return out;
}

JobMesh::ParamDims JobMesh::param_dims(const std::vector<bool>& param_mesh_sharded,
                                       bool expert) const {
  ParamDims p;
  p.sharded_ = split_dims(param_mesh_sharded);
  for (const MeshDim& d : dims_) {
    const int index = mesh_.dim_index(d.name);
    const bool sharded = std::find(p.sharded_.begin(), p.sharded_.end(), index) != p.sharded_.end();
    // An expert's ranks along a dim that holds experts hold other experts: not its replicas.
    if (!d.splits_data() || sharded || (expert && d.row().holds_experts)) continue;
    p.averaged.push_back(d.name);
    p.averaged_sizes.push_back(d.size);
    p.averaged_dims_.push_back(index);
  }
  p.held_along = stage_dims();
  if (expert) {
    for (int d : expert_dims())
      p.held_along.push_back(d);
    std::sort(p.held_along.begin(), p.held_along.end());
  }
  return p;
}

std::vector<int> JobMesh::ParamDims::norm_split(bool zero) const {
  std::vector<int> dims = sharded_;
  dims.insert(dims.end(), held_along.begin(), held_along.end());
  if (zero) dims.insert(dims.end(), averaged_dims_.begin(), averaged_dims_.end());
  std::sort(dims.begin(), dims.end());
  dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
  return dims;
}

std::vector<int> JobMesh::norm_dims(bool zero) const {
  // In this order (clipping packs its sums by it): the parameter dims, the stages, the expert
  // holders, the data dims; each once.
  std::vector<int> dims;
  auto add = [&dims](int d) {
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) dims.push_back(d);
  };
  for (const MeshDim& d : dims_)
    if (d.row().shards_params) add(mesh_.dim_index(d.name));
  for (int d : stage_dims())
    add(d);
  for (int d : expert_dims())
    add(d);
  if (!zero) return dims;
  for (const auto& name : data_dims())
    add(mesh_.dim_index(name));
  return dims;
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
