// The dims of a job's mesh as data: an ordered list of named dims, outer to inner, each with the
// role that says what it does. A new dim is a name, a role (a row of the role table) and a place
// in the order; the job mesh, its groups, the reductions of each parameter and the messages that
// name the mesh follow from the list (NOTE [Dims by role]).
//
// NOTE [Dims by role]
// What a dim does is one row of a table, never a test of its name:
//
//   role      | carries stages | splits batch | splits sequence | shards parameters | holds experts
//   pipeline  |      yes       |              |                 |                   |
//   data      |                |     yes      |                 |                   |
//   expert    |                |     yes      |                 |                   |     yes
//   context   |                |              |       yes       |                   |
//   context   |                |              |       yes       |                   |     yes
//    expert   |                |              |                 |                   |
//   tensor    |                |              |                 | by the placements |
//
// From the rows the job mesh answers every "over which dims?" question (mesh/job_mesh.h):
//   - the loss and eval averages: over the dims that split the batch or the sequence (each rank
//     saw other tokens, as many as the others);
//   - a parameter's gradient average and its ZeRO split: over the dims that split the batch or
//     the sequence, less those the parameter itself is sharded over (a rank that holds its own
//     piece has nobody to average it with) and, for an expert's parameter, less the dims that
//     hold experts (ranks along them hold other experts: NOTE [Expert parallelism]); the sums of
//     Partial gradients stay the DTensor's (NOTE [Gradient placements]);
//   - the gradient norm: over the dims that split a parameter's pieces as the optimizer holds
//     them (its shards, the stages, ZeRO's split);
//   - checkpoint dedupe: ranks along a dim that carries stages hold different tensors, not
//     replicas, and so do ranks along a dim that holds experts for an expert's parameters
//     (checkpoint/checkpoint_writer.h).
// Grad sync, ZeRO, clipping, the train step, the evaluator and checkpoints ask the mesh; none
// tests a dim's name. docs/architecture.md lists what else a new dim touches.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace vescale {

enum class DimRole {
  kPipeline,       ///< pp: stages of the model's layers
  kData,           ///< dp: replicas of the parameters on other rows of the batch
  kExpert,         ///< ep: part of dp whose ranks hold different experts (and other rows)
  kContext,        ///< cp: replicas of the parameters on other parts of each sequence
  kContextExpert,  ///< cp_ep: the part of cp whose ranks hold different experts, when ep does
                   ///< not divide dp (ep = ep x cp_ep; NOTE [Expert parallelism])
  kTensor,         ///< tp: the plan's placements shard parameters and activations over it
};

/// What the dims of one role do: a row of the table of NOTE [Dims by role].
struct DimRoleRow {
  DimRole role;
  bool carries_stages;   ///< ranks along it hold different layers
  bool splits_batch;     ///< ranks along it see other rows of the batch
  bool splits_sequence;  ///< ranks along it see other positions of each sequence
  bool shards_params;    ///< the plan's placements shard parameters over it
  bool holds_experts;    ///< ranks along it hold different experts of each MoE layer
};

/// The row of `role`.
const DimRoleRow& role_row(DimRole role);

struct MeshDim {
  std::string name;  ///< "pp", "dp", "ep", "cp", "cp_ep", "tp", "tp_a"
  int64_t size = 1;
  DimRole role = DimRole::kData;

  const DimRoleRow& row() const { return role_row(role); }
  /// Ranks along it saw other tokens of the step: the batch or the sequence is split over it.
  bool splits_data() const { return row().splits_batch || row().splits_sequence; }
};

using MeshDims = std::vector<MeshDim>;

/// An outer dim a job mesh can have (every dim but the tp mesh's): a new dim is a row of
/// job_dim_rows().
struct JobDimRow {
  const char* name;
  DimRole role;
  bool kept_at_one;  ///< in the mesh even at size 1 (pp, dp), else only when larger (cp)
};

/// The outer dims, outer to inner: pp, dp, ep, cp, cp_ep. With expert parallelism the
/// parallel.ep ranks that hold different experts are carved from the data ranks, dp first: the
/// data-parallel ranks (parallel.dp) are dp x ep and the context-parallel ranks (parallel.cp) are
/// cp x cp_ep, with ep x cp_ep = parallel.ep ("dp" and "cp" are then their outer parts).
const std::vector<JobDimRow>& job_dim_rows();

/// The job mesh's dims, outer to inner: the rows of job_dim_rows() with their `sizes` by name (a
/// name left out has size 1; a dim not kept at one is left out at size 1, so meshes without
/// context parallelism keep their names), then the tp mesh, "tp" or (a 2-D tp mesh, `tp_dims` of
/// two sizes) "tp_a", "tp_b". TP groups are neighbouring ranks.
MeshDims job_mesh_dims(const std::map<std::string, int64_t>& sizes,
                       const std::vector<int64_t>& tp_dims);

/// The product of the sizes.
int64_t ranks_of(const MeshDims& dims);
/// The names of the dims with role `role`, in order.
std::vector<std::string> dims_with_role(const MeshDims& dims, DimRole role);
/// "pp x dp x tp".
std::string dim_names_text(const MeshDims& dims);
/// "1 x 2 x 2".
std::string dim_sizes_text(const MeshDims& dims);

}  // namespace vescale
