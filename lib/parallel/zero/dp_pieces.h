// ZeRO's cut of parameters over dp: which piece of each local tensor a dp rank owns, and how the
// pieces of several tensors pack into one buffer for one collective.
//
// NOTE [ZeRO pieces]
// Each dp rank owns a contiguous range of rows (dim 0) of a parameter's local shard (its tp
// piece), the rows split as torch.chunk — FSDP2's Shard(0) applied after TP. A range of rows of a
// row-major tensor is both a flat range of its memory (what optimizers and collectives want) and
// a box of the global tensor (what checkpoints want): its spec is the parameter's on the job mesh
// re-ordered (pp, tp, dp), with S(0) on dp, the innermost split (DTensorSpec splits outer dims
// first). Optimizer state, reduced gradients and ZeRO-3 parameters are pieces; a checkpoint
// stores them in global coordinates and any layout reads them back.
// Under context parallelism the replicas are dp x cp (JobMesh::ParamDims::averaged): the rows are
// chunked over dp, then each dp chunk over cp — S(0) on dp then S(0) on cp, innermost — which
// for uneven rows is not one chunk over dp x cp, so the pieces follow the nesting.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "dtensor/dtensor_spec.h"

namespace vescale {

/// A flat range of a tensor: [offset, offset + numel).
struct FlatRange {
  int64_t offset = 0;
  int64_t numel = 0;
};

/// Each replica's rows of a local tensor of `local_shape` (at least one dim), as flat ranges, for
/// replica dims of sizes `nesting` (outer first: {dp}, or {dp, cp}): chunked over the first,
/// each chunk over the next. Replica i is numbered row-major over the dims (dp-major).
std::vector<FlatRange> dp_pieces(const std::vector<int64_t>& local_shape,
                                 const std::vector<int64_t>& nesting);

/// Where a replica's piece of a parameter sits in the global tensor: `spec` is the parameter on
/// the job mesh (Replicate on each of `replica_dims`, "dp" or "dp", "cp"); the result lives on
/// that mesh re-ordered with the replica dims innermost, S(0) on each. Its local box is this
/// rank's dp_pieces() range of the parameter's local shard.
DTensorSpec dp_piece_spec(const DTensorSpec& spec, const std::vector<std::string>& replica_dims);

/// The pieces of several flat tensors packed for one collective over `dp` ranks: rank r's segment
/// holds piece r of every tensor in order, each segment padded to the longest, so a
/// reduce-scatter of the packed buffer leaves each rank the reduced pieces it owns and an
/// all-gather of the segments gives every rank every piece.
class DpPacking {
 public:
  /// `pieces[k]`: tensor k's dp_pieces().
  DpPacking(std::vector<std::vector<FlatRange>> pieces, int64_t dp);

  int64_t dp() const { return dp_; }
  size_t tensors() const { return pieces_.size(); }
  /// Elements per rank's segment (padding included) and in the whole buffer.
  int64_t segment() const { return segment_; }
  int64_t numel() const { return segment_ * dp_; }
  /// Tensor k's piece of `rank`, a range of the whole tensor.
  const FlatRange& piece(size_t k, int64_t rank) const { return pieces_[k][rank]; }

  /// Copies every rank's piece of flat tensor k into that rank's segment of `packed`.
  void pack(at::Tensor& packed, size_t k, const at::Tensor& flat) const;
  /// Tensor k's piece within `segment` (rank `rank`'s segment): a view.
  at::Tensor in_segment(const at::Tensor& segment, size_t k, int64_t rank) const;
  /// Copies every rank's piece of tensor k from `packed` into flat tensor `flat`.
  void unpack(const at::Tensor& packed, size_t k, at::Tensor& flat) const;

 private:
  std::vector<std::vector<FlatRange>> pieces_;  // [tensor][rank]
  std::vector<std::vector<int64_t>> at_;        // [tensor][rank]: offset within the segment
  int64_t dp_;
  int64_t segment_ = 0;
};

}  // namespace vescale
