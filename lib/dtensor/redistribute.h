// Redistribution: moving a DTensor between placements on its mesh.
#pragma once

#include <ATen/core/Tensor.h>

#include <utility>
#include <vector>

#include "dtensor/dtensor_spec.h"

namespace vescale {

/// One move of a redistribution: mesh dim `mesh_dim` goes to placement `to`.
struct RedistributeStep {
  int mesh_dim;
  Placement to;
};

/// The moves from `from` to `to`, one mesh dim at a time, in an order that keeps volume low:
/// shrinking moves (R->S, R->P, P->S, S->S) first, then all-reduces, then all-gathers (inner
/// mesh dims first). A dim sharded over several mesh dims is unsharded inner-first and sharded
/// outer-first, so that every intermediate layout is a valid one.
std::vector<RedistributeStep> plan_redistribute(const DTensorSpec& from, const Placements& to);

/// Runs the plan on `local` (this rank's piece under `from`); returns the piece under `to`.
/// Differentiable. *Collective* over the mesh.
at::Tensor redistribute_local(const at::Tensor& local, const DTensorSpec& from,
                              const Placements& to);

}  // namespace vescale
