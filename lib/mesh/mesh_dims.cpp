#include "mesh/mesh_dims.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace vescale {

const DimRoleRow& role_row(DimRole role) {
  // NOTE [Dims by role]: one row per role; the order of the enum.
  static const DimRoleRow kRows[] = {
      //                   stages  batch  sequence  shards  experts
      {DimRole::kPipeline, true, false, false, false, false},
      {DimRole::kData, false, true, false, false, false},
      {DimRole::kExpert, false, true, false, false, true},
      {DimRole::kContext, false, false, true, false, false},
      {DimRole::kContextExpert, false, false, true, false, true},
      {DimRole::kTensor, false, false, false, true, false},
  };
  const DimRoleRow& row = kRows[static_cast<int>(role)];
  VS_CHECK(row.role == role, "[mesh] the role table is out of the enum's order");
  return row;
}

const std::vector<JobDimRow>& job_dim_rows() {
  static const std::vector<JobDimRow> kRows = {
      {"pp", DimRole::kPipeline, true},          {"dp", DimRole::kData, true},
      {"ep", DimRole::kExpert, false},           {"cp", DimRole::kContext, false},
      {"cp_ep", DimRole::kContextExpert, false},
  };
  return kRows;
}

MeshDims job_mesh_dims(const std::map<std::string, int64_t>& sizes,
                       const std::vector<int64_t>& tp_dims) {
  VS_CHECK(tp_dims.size() == 1 || tp_dims.size() == 2, "[mesh] a tp mesh has 1 or 2 dims, not {}",
           tp_dims.size());
  MeshDims dims;
  size_t named = 0;
  for (const JobDimRow& row : job_dim_rows()) {
    const auto it = sizes.find(row.name);
    const int64_t size = it == sizes.end() ? 1 : it->second;
    named += it != sizes.end();
    if (size > 1 || row.kept_at_one) dims.push_back({row.name, size, row.role});
  }
  VS_CHECK(named == sizes.size(), "[mesh] sizes of unknown dims among {}", sizes.size());
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
