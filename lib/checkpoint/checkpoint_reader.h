// Loading a checkpoint (docs/design.md §10): any committed checkpoint, under any mesh and plan,
// each rank reading only the boxes it needs, every byte checked (NOTE [Checkpoint integrity]).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint_format.h"
#include "checkpoint/h5.h"

namespace vescale {

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
  /// Files the datasets of file `f` (index_pieces' first step); returns how many it listed.
  int64_t index_file(size_t f);
  /// Throws unless file `f` lists the `listed` tensors it was written with: /meta "datasets" and
  /// "names_crc32c" (damage can hide a dataset from the listing or change a name).
  void check_listing(size_t f, int64_t listed) const;
  /// Throws unless each tensor's pieces hold at least the elements of its global shape.
  void check_pieces_cover_shapes() const;
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

}  // namespace vescale
