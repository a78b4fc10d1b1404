#include "dtensor/dtensor_spec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/chunking.h"
#include "core/error.h"

namespace vescale {

DTensorSpec::DTensorSpec(DeviceMesh mesh_, Placements placements_, std::vector<int64_t> shape_)
    : mesh(std::move(mesh_)), placements(std::move(placements_)), shape(std::move(shape_)) {
  VS_CHECK(static_cast<int>(placements.size()) == mesh.ndim(),
           "[dtensor] {} placements for a {}-D mesh {}", placements.size(), mesh.ndim(),
           mesh.str());
  for (auto& p : placements) {
    if (!p.is_shard()) continue;
    VS_CHECK(p.dim >= -ndim() && p.dim < ndim(), "[dtensor] {} does not fit a tensor of shape [{}]",
             p.str(), fmt::join(shape, ", "));
    p = p.normalized(ndim());
  }
}

Box Box::whole(std::vector<int64_t> shape) {
  Box box;
  box.sizes = shape;
  box.offsets.assign(shape.size(), 0);
  box.shape = std::move(shape);
  return box;
}

Box Box::local(const DTensorSpec& spec) {
  return spec.local_box(spec.mesh.coordinate());
}

Box DTensorSpec::local_box(const std::vector<int64_t>& coordinate) const {
  Box box = Box::whole(shape);
  for (int i = 0; i < mesh.ndim(); ++i) {
    const Placement& p = placements[i];
    if (!p.is_shard()) continue;
    const int64_t n = mesh.size(i);
    box.offsets[p.dim] += chunk_offsets(box.sizes[p.dim], n)[coordinate[i]];
    box.sizes[p.dim] = chunk_sizes(box.sizes[p.dim], n)[coordinate[i]];
  }
  return box;
}

std::vector<int64_t> DTensorSpec::local_shape() const {
  return Box::local(*this).sizes;
}

std::vector<int64_t> DTensorSpec::local_offset() const {
  return Box::local(*this).offsets;
}

std::vector<int64_t> DTensorSpec::group_piece_sizes(int mesh_dim, int64_t tensor_dim) const {
  // The extent before mesh_dim splits it: the outer mesh dims' chunking only.
  const auto coord = mesh.coordinate();
  int64_t extent = shape[tensor_dim];
  for (int i = 0; i < mesh_dim; ++i) {
    if (placements[i].is_shard(tensor_dim)) extent = chunk_sizes(extent, mesh.size(i))[coord[i]];
  }
  return chunk_sizes(extent, mesh.size(mesh_dim));
}

bool DTensorSpec::has_partial() const {
  return std::any_of(placements.begin(), placements.end(),
                     [](const Placement& p) { return p.is_partial(); });
}

std::vector<int> DTensorSpec::mesh_dims_sharding(int64_t tensor_dim) const {
  std::vector<int> out;
  for (int i = 0; i < mesh.ndim(); ++i) {
    if (placements[i].is_shard(tensor_dim)) out.push_back(i);
  }
  return out;
}

std::vector<int> DTensorSpec::split_dims() const {
  std::vector<int> dims;
  for (int i = 0; i < mesh.ndim(); ++i) {
    if (placements[i].is_shard()) dims.push_back(i);
  }
  return dims;
}

DTensorSpec DTensorSpec::on_mesh(const DeviceMesh& larger) const {
  Placements lifted(larger.ndim(), Placement::replicate());
  const auto names = mesh.dim_names();
  for (size_t i = 0; i < names.size(); ++i)
    lifted[larger.dim_index(names[i])] = placements[i];
  return DTensorSpec(larger, lifted, shape);
}

DTensorSpec DTensorSpec::with_placements(Placements new_placements) const {
  return DTensorSpec(mesh, std::move(new_placements), shape);
}

DTensorSpec DTensorSpec::with_shape(std::vector<int64_t> new_shape) const {
  return DTensorSpec(mesh, placements, std::move(new_shape));
}

std::string DTensorSpec::str() const {
  std::vector<std::string> dims;
  for (int i = 0; i < mesh.ndim(); ++i)
    dims.push_back(fmt::format("{}={}", mesh.dim_names()[i], mesh.size(i)));
  return fmt::format("{} of [{}] on mesh({})", placements_str(placements), fmt::join(shape, ", "),
                     fmt::join(dims, ", "));
}

}  // namespace vescale
