// A parameter's answers from the job mesh (NOTE [Dims by role]): over which dims its gradient is
// averaged, its ZeRO state split, its norm reduced and its checkpoint deduped, read from the
// placements it has on the parameter mesh.
#pragma once

#include "dtensor/dtensor.h"
#include "mesh/job_mesh.h"

namespace vescale {

/// `mesh.param_dims` of a parameter on mesh.param_mesh(): sharded where its placements shard.
JobMesh::ParamDims param_dims_of(const JobMesh& mesh, const DTensor& param);

}  // namespace vescale
