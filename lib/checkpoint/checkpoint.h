// HDF5 checkpoints (docs/design.md §10): sharded (every rank writes all its local state), deduped
// (each unique shard written once, writers spread over its replicas) and merged (full tensors, one
// file). Every shard dataset carries global_shape, global_offset, placements, mesh_shape,
// mesh_dims and replica_id, so a checkpoint loads under any mesh and plan (each rank reads only the
// hyperslabs it needs) and merges without knowing the layout that wrote it.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "checkpoint/h5.h"
#include "dtensor/dtensor.h"

namespace vescale {

enum class CheckpointFormat { kSharded, kDeduped, kMerged };
CheckpointFormat parse_checkpoint_format(const std::string& text);
const char* checkpoint_format_name(CheckpointFormat format);

// NOTE [Checkpoint integrity]
// A checkpoint is refused, with an error naming the file and the tensor, rather than loaded wrong:
// - Checksums. Every dataset carries `crc32c`, the CRC-32C of its raw bytes as written. A reader
//   verifies a dataset on first touch: the first read of a piece reads the whole dataset (a rank
//   file's dataset is one shard; a merged file's one tensor), checks it, and cuts the box it
//   needs from it, so every byte a load uses has been checked, at the cost of reading whole
//   pieces a resharded load only needs part of. `inspect --verify` checks every dataset.
//   Format version 1 files have no checksums: they load with a warning.
// - Identity. /meta of every file holds `run_id` (16 hex digits, drawn by rank 0 when a run
//   starts, kept by a resumed run) and the step and world size; all files of one checkpoint must
//   agree, and a sharded or deduped step folder must hold exactly the files of its world_size
//   ranks. A new run refuses a checkpoints folder holding another run's committed steps unless
//   checkpoint.overwrite = true (then they are deleted), and two jobs never write one folder at
//   once: rank 0 holds an flock on checkpoints/LOCK ("host H pid P") for as long as the job runs.
// - Ranges. /meta and the per-dataset attributes are range-checked before anything is allocated
//   from them (step >= 0, world_size in [1, 2^20], global shapes non-negative with at most 2^40
//   elements, each piece inside its global shape), and a dataset's stored element type must be
//   the model's: HDF5 would convert an int32 dataset to float silently.
// - Files. Temporaries are created with O_CREAT | O_EXCL (a stale one or a symbolic link at the
//   name is removed first, never followed), at most 0644 (folders 0755); files and folders are
//   synced before COMMIT and before `latest`; step folders sort by number (step-1000000 after
//   step-999999); pruning deletes COMMIT first.
constexpr int64_t kCheckpointFormatVersion = 2;  ///< 2: checksums and run_id; 1 still loads

/// What /meta holds besides the tensors.
struct CheckpointMeta {
  std::string run_id;  ///< 16 hex digits, the same in every checkpoint of a run ("" version 1)
  int64_t format_version = kCheckpointFormatVersion;  ///< as read (written: the current one)
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
  /// Reads every dataset of every file and checks its checksum; returns one line per damaged
  /// dataset naming the file and the tensor (empty: all intact). `checked` counts the datasets.
  std::vector<std::string> verify(int64_t* checked = nullptr) const;

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
  /// The box [in_piece, in_piece + count) of a piece, checked against the checksum of its whole
  /// dataset on first touch (NOTE [Checkpoint integrity]).
  at::Tensor read_piece(const Piece& piece, const std::vector<int64_t>& in_piece,
                        const std::vector<int64_t>& count) const;

  std::string path_;
  CheckpointMeta meta_;
  std::vector<std::unique_ptr<h5::File>> files_;
  std::vector<bool> checksummed_;  ///< per file: format version 2 or later
  mutable std::set<std::pair<size_t, std::string>> verified_;  ///< (file, dataset)
  std::map<std::string, std::vector<Piece>> pieces_;
  std::map<std::string, std::vector<int64_t>> shapes_;
  std::map<std::string, std::string> placements_;
  std::map<std::string, std::string> aliases_;
};

/// /meta of a committed step folder or merged file (its first file's; no tensors are read).
CheckpointMeta read_checkpoint_meta(const std::string& path);

/// Writes a merged file from any checkpoint (model and optimizer state, or the model only).
/// Returns the number of tensors written.
int64_t merge_checkpoint(const CheckpointReader& reader, const std::string& output,
                         bool model_only);

}  // namespace vescale
