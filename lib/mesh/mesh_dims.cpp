#include "mesh/mesh_dims.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace vescale {

MeshDims job_mesh_dims(int64_t pp, int64_t dp, int64_t cp, const std::vector<int64_t>& tp_dims) {
  VS_CHECK(tp_dims.size() == 1 || tp_dims.size() == 2, "[mesh] a tp mesh has 1 or 2 dims, not {}",
           tp_dims.size());
  MeshDims dims{{"pp", pp, DimRole::kPipeline}, {"dp", dp, DimRole::kData}};
  if (cp > 1) dims.push_back({"cp", cp, DimRole::kContext});
  if (tp_dims.size() == 1) {
    dims.push_back({"tp", tp_dims[0], DimRole::kTensor});
  } else {
    dims.push_back({"tp_a", tp_dims[0], DimRole::kTensor});
    dims.push_back({"tp_b", tp_dims[1], DimRole::kTensor});
  }
  return dims;
}

int64_t ranks_of(const MeshDims& dims) {
  int64_t n = 1;
  for (const MeshDim& d : dims)
    n *= d.size;
  return n;
}

std::vector<std::string> dims_with_role(const MeshDims& dims, DimRole role) {
  std::vector<std::string> names;
  for (const MeshDim& d : dims)
    if (d.role == role) names.push_back(d.name);
  return names;
}

std::string dim_names_text(const MeshDims& dims) {
  std::vector<std::string> names;
  for (const MeshDim& d : dims)
    names.push_back(d.name);
  return fmt::format("{}", fmt::join(names, " x "));
}

std::string dim_sizes_text(const MeshDims& dims) {
  std::vector<int64_t> sizes;
  for (const MeshDim& d : dims)
    sizes.push_back(d.size);
  return fmt::format("{}", fmt::join(sizes, " x "));
}

}  // namespace vescale
