#include "parallel/param_dims.h"

#include <vector>

namespace vescale {

JobMesh::ParamDims param_dims_of(const JobMesh& mesh, const DTensor& param) {
  std::vector<bool> sharded;
  for (const Placement& p : param.placements())
    sharded.push_back(p.is_shard());
  return mesh.param_dims(sharded);
}

}  // namespace vescale
