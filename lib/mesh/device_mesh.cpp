#include "mesh/device_mesh.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace vescale {

// ---------------------------------------------------------------------------------------------
// MeshSpec
// ---------------------------------------------------------------------------------------------

int64_t MeshSpec::numel() const {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<int64_t>());
}

std::string MeshSpec::str() const {
  std::vector<std::string> parts;
  for (size_t i = 0; i < shape.size(); ++i)
    parts.push_back(fmt::format("{}={}", dim_names[i], shape[i]));
  return fmt::format("{}", fmt::join(parts, ","));
}

MeshSpec MeshSpec::parse(const std::string& text, const std::string& what) {
  MeshSpec spec;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(start, end - start);
    const size_t eq = item.find('=');
    int64_t size = 0;
    bool ok = eq != std::string::npos && eq > 0 && eq + 1 < item.size();
    if (ok) {
      const std::string number = item.substr(eq + 1);
      ok = number.find_first_not_of("0123456789") == std::string::npos;
      if (ok) size = std::stoll(number);
    }
    VS_USER_CHECK(ok && size >= 1,
                  "{}: bad mesh entry '{}' in '{}': expected name=size with size >= 1, e.g. "
                  "pp=1,dp=2,tp=2",
                  what, item, text);
    const std::string name = item.substr(0, eq);
    VS_USER_CHECK(
        std::find(spec.dim_names.begin(), spec.dim_names.end(), name) == spec.dim_names.end(),
        "{}: mesh dim '{}' appears twice in '{}'", what, name, text);
    spec.dim_names.push_back(name);
    spec.shape.push_back(size);
    start = end + 1;
  }
  return spec;
}

// ---------------------------------------------------------------------------------------------
// DeviceMesh
// ---------------------------------------------------------------------------------------------

struct DeviceMesh::State {
  MeshSpec spec;
  std::optional<comm::Group> world;  // none for a layout-only mesh
  int world_rank = 0;
  std::vector<comm::Group> groups;  // one per dim of the full mesh
};

DeviceMesh::DeviceMesh(std::shared_ptr<const State> state, std::vector<int> dims)
    : state_(std::move(state)), dims_(std::move(dims)) {}

DeviceMesh::DeviceMesh(const comm::Group& world, const MeshSpec& spec) {
  VS_USER_CHECK(!spec.shape.empty(), "[mesh] a mesh needs at least one dim");
  VS_USER_CHECK(spec.numel() == world.size(),
                "[mesh] mesh {} has {} ranks but the world has {}: make the product of the mesh "
                "dims equal the number of processes",
                spec.str(), spec.numel(), world.size());
  auto state = std::make_shared<State>(State{spec, world, world.rank(), {}});
  state_ = state;
  dims_.resize(spec.shape.size());
  std::iota(dims_.begin(), dims_.end(), 0);

  // For each dim, partition the world into lines along that dim; every rank builds its line.
  const int ndims = static_cast<int>(spec.shape.size());
  for (int d = 0; d < ndims; ++d) {
    std::vector<std::vector<int>> lines;
    for (int r = 0; r < world.size(); ++r) {
      std::vector<int64_t> coord = full_coordinate_of(r);
      if (coord[d] != 0) continue;
      std::vector<int> line;
      for (int64_t i = 0; i < spec.shape[d]; ++i) {
        coord[d] = i;
        line.push_back(full_rank_at(coord));
      }
      lines.push_back(std::move(line));
    }
    state->groups.push_back(world.split(lines, spec.dim_names[d]));
  }
}

std::vector<int64_t> DeviceMesh::shape() const {
  std::vector<int64_t> out;
  for (int d : dims_)
    out.push_back(state_->spec.shape[d]);
  return out;
}

std::vector<std::string> DeviceMesh::dim_names() const {
  std::vector<std::string> out;
  for (int d : dims_)
    out.push_back(state_->spec.dim_names[d]);
  return out;
}

int64_t DeviceMesh::numel() const {
  int64_t n = 1;
  for (int d : dims_)
    n *= state_->spec.shape[d];
  return n;
}

int DeviceMesh::dim_index(const std::string& dim) const {
  for (int i = 0; i < ndim(); ++i) {
    if (state_->spec.dim_names[dims_[i]] == dim) return i;
  }
  throw Error(
      fmt::format("[mesh] no dim '{}' in mesh with dims {}", dim, fmt::join(dim_names(), ", ")));
}

bool DeviceMesh::has_dim(const std::string& dim) const {
  auto names = dim_names();
  return std::find(names.begin(), names.end(), dim) != names.end();
}

int64_t DeviceMesh::size(const std::string& dim) const {
  return size(dim_index(dim));
}

int64_t DeviceMesh::size(int dim) const {
  VS_CHECK(dim >= 0 && dim < ndim(), "[mesh] dim {} out of range for {}-D mesh", dim, ndim());
  return state_->spec.shape[dims_[dim]];
}

int DeviceMesh::world_rank() const {
  return state_->world_rank;
}

DeviceMesh DeviceMesh::layout(const MeshSpec& spec, int world_rank) {
  VS_USER_CHECK(!spec.shape.empty(), "[mesh] a mesh needs at least one dim");
  VS_CHECK(world_rank >= 0 && world_rank < spec.numel(), "[mesh] rank {} is not in mesh {}",
           world_rank, spec.str());
  auto state = std::make_shared<State>(State{spec, std::nullopt, world_rank, {}});
  std::vector<int> dims(spec.shape.size());
  std::iota(dims.begin(), dims.end(), 0);
  return DeviceMesh(state, dims);
}

bool DeviceMesh::has_groups() const {
  return state_->world.has_value();
}

std::vector<int64_t> DeviceMesh::full_coordinate_of(int world_rank) const {
  const auto& shape = state_->spec.shape;
  std::vector<int64_t> coord(shape.size());
  int64_t rest = world_rank;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    coord[d] = rest % shape[d];
    rest /= shape[d];
  }
  return coord;
}

int DeviceMesh::full_rank_at(const std::vector<int64_t>& coordinate) const {
  const auto& shape = state_->spec.shape;
  int64_t rank = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    rank = rank * shape[d] + coordinate[d];
  return static_cast<int>(rank);
}

bool DeviceMesh::contains(int world_rank) const {
  if (world_rank < 0 || world_rank >= state_->spec.numel()) return false;
  const auto mine = full_coordinate_of(this->world_rank());
  const auto theirs = full_coordinate_of(world_rank);
  for (size_t d = 0; d < mine.size(); ++d) {
    if (std::find(dims_.begin(), dims_.end(), static_cast<int>(d)) == dims_.end() &&
        mine[d] != theirs[d]) {
      return false;
    }
  }
  return true;
}

std::vector<int64_t> DeviceMesh::coordinate() const {
  return coordinate_of(world_rank());
}

std::vector<int64_t> DeviceMesh::coordinate_of(int world_rank) const {
  VS_CHECK(contains(world_rank), "[mesh] rank {} is not in {}", world_rank, str());
  const auto full = full_coordinate_of(world_rank);
  std::vector<int64_t> out;
  for (int d : dims_)
    out.push_back(full[d]);
  return out;
}

int DeviceMesh::rank_at(const std::vector<int64_t>& coordinate) const {
  VS_CHECK(static_cast<int>(coordinate.size()) == ndim(),
           "[mesh] coordinate of {} dims for a {}-D mesh", coordinate.size(), ndim());
  auto full = full_coordinate_of(world_rank());
  for (int i = 0; i < ndim(); ++i) {
    VS_CHECK(coordinate[i] >= 0 && coordinate[i] < size(i),
             "[mesh] coordinate {} out of range for mesh shape {}", fmt::join(coordinate, ","),
             fmt::join(shape(), "x"));
    full[dims_[i]] = coordinate[i];
  }
  return full_rank_at(full);
}

const comm::Group& DeviceMesh::group(const std::string& dim) const {
  return group(dim_index(dim));
}

const comm::Group& DeviceMesh::group(int dim) const {
  VS_CHECK(dim >= 0 && dim < ndim(), "[mesh] dim {} out of range for {}-D mesh", dim, ndim());
  VS_CHECK(has_groups(), "[mesh] {} is layout-only: it has no groups", str());
  return state_->groups[dims_[dim]];
}

const comm::Group& DeviceMesh::world() const {
  VS_CHECK(has_groups(), "[mesh] {} is layout-only: it has no world group", str());
  return *state_->world;
}

Device DeviceMesh::device() const {
  return has_groups() ? state_->world->device() : kCpu;
}

std::optional<int> DeviceMesh::neighbor(const std::string& dim, int offset, bool wrap) const {
  const int i = dim_index(dim);
  auto coord = coordinate();
  int64_t target = coord[i] + offset;
  const int64_t n = size(i);
  if (wrap) {
    target = ((target % n) + n) % n;
  } else if (target < 0 || target >= n) {
    return std::nullopt;
  }
  coord[i] = target;
  return rank_at(coord);
}

Replica DeviceMesh::replica(const std::vector<int>& split) const {
  const auto coord = coordinate();
  Replica r;
  for (int i = 0; i < ndim(); ++i) {
    if (std::find(split.begin(), split.end(), i) != split.end()) continue;
    r.index = r.index * size(i) + coord[i];
    r.count *= size(i);
  }
  return r;
}

DeviceMesh DeviceMesh::operator[](const std::string& dim) const {
  return sub({dim});
}

DeviceMesh DeviceMesh::sub(const std::vector<std::string>& dims) const {
  VS_CHECK(!dims.empty(), "[mesh] a sub-mesh needs at least one dim");
  std::vector<int> picked;
  for (const auto& name : dims) {
    const int full_dim = dims_[dim_index(name)];
    VS_CHECK(std::find(picked.begin(), picked.end(), full_dim) == picked.end(),
             "[mesh] dim '{}' named twice in a sub-mesh", name);
    picked.push_back(full_dim);
  }
  return DeviceMesh(state_, picked);
}

std::string DeviceMesh::str() const {
  std::vector<std::string> parts;
  for (int i = 0; i < ndim(); ++i)
    parts.push_back(fmt::format("{}={}", dim_names()[i], size(i)));
  return fmt::format("DeviceMesh({}) rank {} at ({})", fmt::join(parts, ", "), world_rank(),
                     fmt::join(coordinate(), ", "));
}

}  // namespace vescale
