// The dims of a job's mesh as data: an ordered list of named dims, outer to inner, each with the
// role that says what it splits (docs/design.md §17). A new dim is a name, a role and a place in
// the order; the job mesh, its groups and the messages that name the mesh follow from the list.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vescale {

enum class DimRole {
  kPipeline,  ///< pp: stages of the model's layers
  kData,      ///< dp: replicas of the parameters on other rows of the batch (grads reduced)
  kContext,   ///< cp: replicas of the parameters on other parts of each sequence (grads reduced)
  kTensor,    ///< tp: the plan's placements shard parameters and activations over it
};

struct MeshDim {
  std::string name;  ///< "pp", "dp", "tp", "tp_a"
  int64_t size = 1;
  DimRole role = DimRole::kData;
};

using MeshDims = std::vector<MeshDim>;

/// The job mesh's dims, outer to inner: pp, dp, cp (only when `cp` > 1, so meshes without context
/// parallelism keep their names), then the tp mesh, "tp" or (a 2-D tp mesh, `tp_dims` of two
/// sizes) "tp_a", "tp_b". TP groups are neighbouring ranks.
MeshDims job_mesh_dims(int64_t pp, int64_t dp, int64_t cp, const std::vector<int64_t>& tp_dims);

/// The product of the sizes.
int64_t ranks_of(const MeshDims& dims);
/// The names of the dims with role `role`, in order.
std::vector<std::string> dims_with_role(const MeshDims& dims, DimRole role);
/// "pp x dp x tp".
std::string dim_names_text(const MeshDims& dims);
/// "1 x 2 x 2".
std::string dim_sizes_text(const MeshDims& dims);

}  // namespace vescale
