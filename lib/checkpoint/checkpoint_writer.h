// Saving a checkpoint (docs/design.md §10): sharded, deduped or merged, at once or through a
// snapshot in host memory that another thread writes.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_format.h"
#include "dtensor/dtensor.h"

namespace vescale {

/// One tensor of the training state: a parameter ("model/<fqn>") or an optimizer state
/// ("optimizer/<fqn>/exp_avg"), with its placements on the full job mesh.
struct StateTensor {
  std::string name;  ///< path under the file root, e.g. "model/transformer.wte.weight"
  at::Tensor local;
  DTensorSpec spec;  ///< on the full (pp, dp, tp) mesh
  /// Dims of `spec.mesh` along which ranks hold different tensors, not replicas, besides the
  /// dims that shard this one (pp: each pipeline stage its own parameters; ep: an expert's).
  std::vector<int> held_along = {};
};

/// Writes the state of step `meta.step` to <dir>/step-XXXXXX/ (temporary files renamed, COMMIT
/// last, then <dir>/latest), and prunes all but the newest `keep` committed steps (keep <= 0: all).
/// `aliases` maps tied names to their targets ("model/lm_head.weight" ->
/// "model/transformer.wte.weight"). Merged gathers full tensors one at a time on the first rank of
/// each group of ranks holding the same tensors (of `held_along`), which write one file in turn.
/// *Collective* over `world`. Returns the step folder.
std::string save_checkpoint(const std::string& dir, CheckpointFormat format,
                            const std::vector<StateTensor>& state,
                            const std::map<std::string, std::string>& aliases,
                            const CheckpointMeta& meta, const comm::Group& world, int64_t keep);

/// One rank's part of a checkpoint held in host memory, ready to be written by another thread.
struct CheckpointSnapshot {
  std::string dir;     ///< the checkpoints folder
  std::string folder;  ///< its step folder
  CheckpointFormat format = CheckpointFormat::kSharded;
  CheckpointMeta meta;
  std::map<std::string, std::string> aliases;
  int64_t keep = 0;
  std::vector<SavedPiece> pieces;  ///< copies of what this rank writes (merged: full tensors)
  int writer_rank = 0;             ///< merged: the rank writing this rank's tensors, in turn
  int64_t bytes() const;           ///< of the pieces
};

/// Creates the step folder and copies what this rank will write to host memory: its pieces
/// (sharded, deduped) or, merged, the full tensors gathered one at a time on their writer.
/// *Collective* over `world`; write_snapshot() finishes the save.
CheckpointSnapshot snapshot_checkpoint(const std::string& dir, CheckpointFormat format,
                                       const std::vector<StateTensor>& state,
                                       const std::map<std::string, std::string>& aliases,
                                       const CheckpointMeta& meta, const comm::Group& world,
                                       int64_t keep);

/// Writes a snapshot's files and commits them exactly as save_checkpoint does (COMMIT after every
/// rank's files are written, synced and renamed; then latest; then pruning). Does file I/O and
/// barriers over `group` only, which must hold the ranks of the snapshot's world in the same
/// order. *Collective* over `group`.
void write_snapshot(const CheckpointSnapshot& snapshot, const comm::Group& group);

/// Bytes of the files in a step folder (its size on disk once committed).
int64_t folder_bytes(const std::string& folder);

}  // namespace vescale
