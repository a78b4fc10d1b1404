// What a checkpoint file holds (docs/design.md §10): the formats, the version, /meta, and the
// attributes of each piece; the writer, the reader and merge all write and read files through
// these.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_format_names.h"
#include "checkpoint/h5.h"

namespace vescale {

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
  /// A LoRA run's (NOTE [LoRA]): the base it adapts, as checkpoint.load named it (a path made
  /// absolute, or "hf:DIR"), and the CRC-32C of its files; "" for any other run.
  std::string lora_base, lora_base_checksum;
};

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

namespace detail {

/// Writes /meta: the format version this build writes, and `meta`'s fields.
void write_meta(h5::File& file, const CheckpointMeta& meta);
/// Reads /meta, checking the format version and its ranges (NOTE [Checkpoint integrity]).
CheckpointMeta read_meta(const h5::File& file);
/// Throws unless every file of one checkpoint says it is of the same run, step and world size.
void check_same_checkpoint(const h5::File& file, const CheckpointMeta& m,
                           const CheckpointMeta& first, const std::string& first_path);
/// Writes a piece's tensor (checksummed) at /<name> with its placement attributes.
void write_piece(h5::File& file, const SavedPiece& piece);
/// A full tensor of a merged file, with the attributes of a single piece covering it all.
SavedPiece full_piece(const std::string& name, at::Tensor full);
/// CRC-32C of the file's tensor names ("model/...", "optimizer/..."), sorted, one per line: a
/// byte flipped in a name changes it (the data's own checksums cannot see a renamed tensor).
int64_t names_checksum(const h5::File& file);
/// /meta "datasets": how many tensors the writer put in the file, so a reader finds a dataset
/// that damage hid from the listing (it would otherwise look like a missing piece); and
/// "names_crc32c", the checksum of their names (names_checksum).
void stamp_dataset_count(h5::File& file);
/// Hard links for tied names, listed in /meta "aliases" as "alias=target;..." (a hard link has
/// no direction: the list says which name is the parameter's own).
void link_aliases(h5::File& file, const std::map<std::string, std::string>& aliases);
/// Throws unless a piece's attributes are in range: a global shape of non-negative dims and at
/// most 2^40 elements, and the piece (offset, extent) inside it.
void check_piece(const std::string& file, const std::string& dataset,
                 const std::vector<int64_t>& global_shape, const std::vector<int64_t>& offset,
                 const std::vector<int64_t>& extent);

}  // namespace detail
}  // namespace vescale
