// JobMesh: the job's mesh (its dims as data: mesh_dims.h), and the one place that answers questions
// about it — which dp or pp rank this is, which sub-mesh parameters live on, over which dims a
// parameter's gradient is averaged, its ZeRO state split, its norm reduced and its checkpoint
// deduped (NOTE [Dims by role]), and which replica of a piece this rank holds. The trainer, grad
// sync, ZeRO, plan lint, checkpoints and gradient clipping ask it rather than deciding themselves.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "mesh/device_mesh.h"
#include "mesh/mesh_dims.h"

namespace vescale {

class JobMesh {
 public:
  /// Builds the mesh of `dims` (outer to inner) and its groups. *Collective* over `world` (of
  /// ranks_of(dims) ranks).
  JobMesh(const comm::Group& world, const MeshDims& dims);
  /// A layout-only job mesh as seen from `world_rank` (no groups): for plan lint and dumps.
  static JobMesh layout(const MeshDims& dims, int world_rank = 0);

  /// The pp x dp x tp mesh (job_mesh_dims) and its groups. *Collective* over `world`.
  JobMesh(const comm::Group& world, int64_t pp, int64_t dp, int64_t tp);
  /// The same with a tp mesh of the sizes `tp_dims`: {tp} (1-D) or {tp_a, tp_b}.
  JobMesh(const comm::Group& world, int64_t pp, int64_t dp, const std::vector<int64_t>& tp_dims);
  static JobMesh layout(int64_t pp, int64_t dp, int64_t tp, int world_rank = 0);
  static JobMesh layout(int64_t pp, int64_t dp, const std::vector<int64_t>& tp_dims,
                        int world_rank = 0);

  /// The whole mesh.
  const DeviceMesh& mesh() const { return mesh_; }
  /// Its dims, outer to inner, with their roles.
  const MeshDims& dims() const { return dims_; }
  /// The sub-mesh parameters and activations are sharded on (plans are written for it, one
  /// placement per dim): the dims of role kTensor.
  const DeviceMesh& param_mesh() const { return param_mesh_; }

  int64_t pp() const { return mesh_.size("pp"); }
  /// The outer data-parallel degree: parallel.dp over its part in ep.
  int64_t dp() const { return mesh_.size("dp"); }
  /// The expert-parallel degree (parallel.ep): the ranks along the dims that hold experts, 1
  /// without them; and this rank's index among them, row-major (its rank in expert_group()).
  int64_t ep() const { return size_along(role_dims(&DimRoleRow::holds_experts)); }
  int64_t ep_rank() const { return index_along(role_dims(&DimRoleRow::holds_experts)); }
  /// The cp degree (parallel.cp): the ranks along the dims that split the sequence, 1 without
  /// them; and this rank's index among them, row-major (its rank in sequence_group()).
  int64_t cp() const { return size_along(role_dims(&DimRoleRow::splits_sequence)); }
  int64_t cp_rank() const { return index_along(role_dims(&DimRoleRow::splits_sequence)); }
  /// The group along the dims that hold experts, labelled "ep": the all-to-alls of expert
  /// parallelism (NOTE [Expert parallelism]). Needs groups and ep() > 1.
  const comm::Group& expert_group() const;
  /// The group along the dims that split the sequence, labelled "cp": context parallelism's
  /// ring, numbered by the sequence's parts. Needs groups and cp() > 1.
  const comm::Group& sequence_group() const;
  /// The tp degree: the tp mesh's ranks, over all its dims.
  int64_t tp() const { return param_mesh_.numel(); }
  int64_t pp_rank() const { return coordinate("pp"); }
  int64_t dp_rank() const { return coordinate("dp"); }
  /// This rank's index in its tp mesh (row-major over a 2-D one).
  int64_t tp_rank() const;
  /// This rank's group along a dim ("dp": data parallel peers). Needs groups.
  const comm::Group& group(const std::string& dim) const { return mesh_.group(dim); }

  // NOTE [Dims by role]: the questions below are answered from the dims' roles.

  /// The dims that split the batch or the sequence, outer first: {"dp"}, or {"dp", "cp"}. The
  /// loss and eval averages are over them.
  std::vector<std::string> data_dims() const;
  /// Their group: dp's, or the dp x cp ranks numbered dp-major (its rank is dp_rank() x cp() +
  /// cp_rank()); labelled "dp", as its bytes are the data-parallel ones. Needs groups.
  const comm::Group& data_group() const { return replicas_of(data_dims()); }
  /// The ranks that split the batch (its rows, not its sequences), and this rank's index among
  /// them: dp, dp_rank().
  int64_t batch_shards() const;
  int64_t batch_rank() const;

  /// Over which dims one parameter's state is reduced, split and deduped.
  struct ParamDims {
    /// Its gradient is averaged, and ZeRO splits its state, over these: the dims that split the
    /// data, less those it is sharded over. Outer first.
    std::vector<std::string> averaged;
    std::vector<int64_t> averaged_sizes;
    /// Mesh dims (of mesh()) along which ranks hold different tensors, neither shards nor
    /// replicas of it: the stages (pp > 1). Checkpoints dedupe along the others.
    std::vector<int> held_along;
    /// Mesh dims that split its pieces for the gradient norm: its shards and the stages, and
    /// under ZeRO the dims its state is split over.
    std::vector<int> norm_split(bool zero) const;

   private:
    friend class JobMesh;
    std::vector<int> sharded_;
    std::vector<int> averaged_dims_;
  };
  /// The answers for a parameter sharded over the dims of param_mesh() flagged in
  /// `param_mesh_sharded` (one flag per dim); `expert`: one expert's parameter of an MoE layer,
  /// held by one rank along the dims that hold experts.
  ParamDims param_dims(const std::vector<bool>& param_mesh_sharded, bool expert = false) const;
  /// The group of replicas over the dims `dims` (some of data_dims(), outer first; a
  /// ParamDims::averaged), numbered row-major. Needs groups.
  const comm::Group& replicas_of(const std::vector<std::string>& dims) const;
  /// The mesh dims the gradient norm reduces over: every dim that can shard parameters, the
  /// stages (pp > 1), the dims that hold experts (ep > 1) and, under ZeRO, the data dims; each
  /// parameter's norm_split() is among them.
  std::vector<int> norm_dims(bool zero) const;

  /// The group of the pp ranks `members` of this rank's pipeline (this rank must be one of them):
  /// e.g. the first and last stage's ranks that share a tied weight. *Collective* over the pp
  /// group (every pp rank passes the same members).
  comm::Group pp_subgroup(const std::vector<int>& members, const std::string& label) const;

  /// Index in mesh() of each dim of param_mesh(), in order.
  std::vector<int> param_mesh_dims() const;
  /// Mesh dims (of mesh()) that split a piece, given which dims of param_mesh() shard it and
  /// which job-mesh dims split it further (e.g. "dp" for ZeRO state).
  std::vector<int> split_dims(const std::vector<bool>& param_mesh_sharded,
                              const std::vector<std::string>& extra = {}) const;
  /// The mesh dims, other than `split`, over which a piece is replicated.
  std::vector<int> replicated_dims(const std::vector<int>& split) const;
  /// Which replica of its piece this rank holds, for a piece split over mesh dims `split`.
  Replica replica(const std::vector<int>& split) const { return mesh_.replica(split); }

  /// "DeviceMesh(pp=1, dp=2, tp=2) rank 3 at (0, 1, 1)".
  std::string str() const { return mesh_.str(); }

 private:
  JobMesh(DeviceMesh mesh, MeshDims dims);
  int64_t coordinate(const std::string& dim) const;

  MeshDims dims_;
  DeviceMesh mesh_;
  DeviceMesh param_mesh_;
  /// Stage dims of more than one rank (mesh() indices).
  std::vector<int> stage_dims() const;
  /// Dims of more than one rank that hold experts (mesh() indices).
  std::vector<int> expert_dims() const;
  /// The names of the dims whose role row has `what`, outer first.
  std::vector<std::string> role_dims(bool DimRoleRow::*what) const;
  /// The ranks along `names`, and this rank's index among them (row-major).
  int64_t size_along(const std::vector<std::string>& names) const;
  int64_t index_along(const std::vector<std::string>& names) const;
  /// The ranks along `names` (row-major), one list per coordinate on the other dims.
  std::vector<std::vector<int>> lines_along(const std::vector<std::string>& names) const;
  /// Builds a group for each set of two or more data dims, and the ep and cp groups where their
  /// dims are not one dim of that name. *Collective* over `world`.
  void build_groups(const comm::Group& world);
  const comm::Group& group_along(bool DimRoleRow::*what, const std::string& label) const;

  std::map<std::vector<std::string>, comm::Group> replica_groups_;  // over 2+ data dims
  std::map<std::string, comm::Group> role_groups_;                  // "ep", "cp" over 2+ dims
};

}  // namespace vescale
