// HDF5 checkpoints (DESIGN §10): sharded (every rank writes all its local state), deduped (each
// unique shard written once, writers spread over its replicas) and merged (full tensors, one
// file). Every shard dataset carries global_shape, global_offset, placements, mesh_shape,
// mesh_dims and replica_id, so a checkpoint loads under any mesh and plan (each rank reads only the
// hyperslabs it needs) and merges without knowing the layout that wrote it.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/h5.h"
#include "dtensor/dtensor.h"

namespace vescale {

enum class CheckpointFormat { kSharded, kDeduped, kMerged };
CheckpointFormat parse_checkpoint_format(const std::string& text);
const char* checkpoint_format_name(CheckpointFormat format);

constexpr int64_t kCheckpointFormatVersion = 1;

/// What /meta holds besides the tensors.
struct CheckpointMeta {
  int64_t step = 0;  ///< optimizer steps done; also the data position (batches are f(seed, step))
  int64_t seed = 0;  ///< the RNG state: init, data order and dropout masks derive from (seed, step)
  int64_t optimizer_steps = 0;
  std::string config;  ///< the job config text
  std::string plan;
  std::string format;
  int64_t world_size = 1;
  std::vector<int64_t> mesh_shape;
  std::vector<std::string> mesh_dims;
};

/// One tensor of the training state: a parameter ("model/<fqn>") or an optimizer state
/// ("optimizer/<fqn>/exp_avg"), with its placements on the full job mesh.
struct StateTensor {
  std::string name;  ///< path under the file root, e.g. "model/transformer.wte.weight"
  at::Tensor local;
  DTensorSpec spec;  ///< on the full (pp, dp, tp) mesh
  /// Mesh dims along which ranks hold different tensors, not replicas, besides the dims that
  /// shard this one (pp: each pipeline stage its own parameters).
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

/// A tensor as one rank writes it: its dataset name, values and placement attributes.
struct SavedPiece {
  std::string name;  ///< "model/<fqn>" or "optimizer/<fqn>/<state>"
  at::Tensor tensor;
  std::vector<int64_t> global_shape, global_offset;
  std::string placements;  ///< "[R, S(0)]", or "merged" for a full tensor
  std::vector<int64_t> mesh_shape;
  std::string mesh_dims;
  int64_t replica_id = 0;
};

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

/// A committed checkpoint opened for reading: a step folder (sharded or deduped), a merged .h5, or
/// a checkpoints folder / "<dir>/latest" (its newest committed step).
class CheckpointReader {
 public:
  explicit CheckpointReader(const std::string& path);

  const CheckpointMeta& meta() const { return meta_; }
  const std::string& path() const { return path_; }
  /// Tensor names ("model/...", "optimizer/..."), aliases excluded.
  std::vector<std::string> names() const;
  bool has(const std::string& name) const { return pieces_.count(name) > 0; }
  std::vector<int64_t> global_shape(const std::string& name) const;
  at::ScalarType dtype(const std::string& name) const;
  /// The placements string a piece of `name` was written with ("[R, R, S(0)]"; merged: "").
  std::string placements(const std::string& name) const;
  /// The box [offsets, offsets + sizes) of tensor `name`, read from the pieces that overlap it.
  /// Throws UserError naming the tensor if part of it is in no file (a missing rank file).
  at::Tensor read_box(const std::string& name, const std::vector<int64_t>& offsets,
                      const std::vector<int64_t>& sizes) const;
  at::Tensor read_full(const std::string& name) const;
  /// Aliases (tied names) and their targets.
  const std::map<std::string, std::string>& aliases() const { return aliases_; }
  /// Bytes of the files on disk.
  int64_t bytes_on_disk() const;
  std::vector<std::string> files() const;

 private:
  struct Piece {
    size_t file;
    std::string dataset;
    std::vector<int64_t> offsets, sizes;
  };
  /// Files each dataset under /model and /optimizer as a piece of its tensor.
  void index_pieces();
  /// Reads the tied names the writer listed and files their pieces under the targets.
  void read_aliases();

  std::string path_;
  CheckpointMeta meta_;
  std::vector<std::unique_ptr<h5::File>> files_;
  std::map<std::string, std::vector<Piece>> pieces_;
  std::map<std::string, std::vector<int64_t>> shapes_;
  std::map<std::string, std::string> placements_;
  std::map<std::string, std::string> aliases_;
};

/// Writes a merged file from any checkpoint (model and optimizer state, or the model only).
/// Returns the number of tensors written.
int64_t merge_checkpoint(const CheckpointReader& reader, const std::string& output,
                         bool model_only);

}  // namespace vescale
