// Gradient clipping by the global norm: the norm of all gradients of the job as one vector, each
// element counted once however the parameters are sharded (tp), split (ZeRO over dp) or spread
// over pipeline stages (pp).
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "mesh/device_mesh.h"

namespace vescale {

/// A rank's piece of one gradient, and the mesh dims over which the pieces of that gradient are
/// disjoint: its squares are summed over those dims and counted once over the others (where
/// ranks hold replicas).
struct GradPiece {
  at::Tensor grad;  ///< undefined: no gradient (counts as zero)
  std::vector<int> split_dims;
  /// False for a copy another rank counts (a weight tied across pipeline stages): clipping
  /// scales it but the norm leaves it out.
  bool counted = true;
};

/// The global gradient norm: a float64 scalar tensor on the mesh's device, never read on the host
/// here (NOTE [One host sync]). `reduce_dims` are the mesh dims that may split some gradient
/// anywhere in the job (every rank passes the same list; each piece's split_dims must be among
/// them). *Collective* over each dim of `reduce_dims`: one all-reduce per dim.
at::Tensor global_grad_norm(const std::vector<GradPiece>& pieces, const DeviceMesh& mesh,
                            const std::vector<int>& reduce_dims);

/// Scales every gradient so the global norm is at most `max_norm` (PyTorch's clip_grad_norm_;
/// max_norm <= 0: no clipping), by a factor computed on the device: min(1, max_norm / (norm +
/// 1e-6)). Returns the norm before clipping, as global_grad_norm. *Collective* as above.
at::Tensor clip_grad_norm(const std::vector<GradPiece>& pieces, const DeviceMesh& mesh,
                          const std::vector<int>& reduce_dims, double max_norm);

}  // namespace vescale
