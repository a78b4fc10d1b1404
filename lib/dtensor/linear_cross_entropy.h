#pragma once
// The LM head and its cross entropy as one kernel on local tensors (NOTE [Fused LM loss]). The
// DTensor op around it (ops::linear_cross_entropy) decides placements; this sees one rank's rows
// of the hidden state and its rows of the vocabulary.

#include <ATen/Tensor.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "comm/group.h"
#include "kernels/kernel_table.h"

namespace vescale::local {

/// The rows of the head's weight this rank holds: global rows [offset, offset + weight rows),
/// of which the first `real` are tokens and the rest vocabulary padding (never a class).
struct VocabSlice {
  int64_t offset = 0;
  int64_t real = 0;
  /// The mesh dims' groups the vocabulary is split over (vocab-parallel); empty: all of it.
  std::vector<const comm::Group*> groups;
};

/// A chunk of rows: their summed loss (a scalar in the loss's type) and, when asked, their
/// logits' gradient over N in the logits' type.
struct LossChunk {
  at::Tensor loss;
  at::Tensor grad;
};

/// One chunk's loss and gradient from its logits [rows, columns of this slice] and targets
/// [rows] by the LM loss table's row `path` (NOTE [Fused LM loss]): the same ATen calls on every
/// device, so that a CPU test of a row tests what CUDA runs. `acc`: the loss's type (float32 for
/// bf16 and float16 logits). The log-softmax rows need vocab.groups empty. `masked`: targets may
/// be kIgnoreTarget, rows with no loss and no gradient (NOTE [Loss masks]; pass by pass only).
LossChunk loss_chunk(kernels::LossPathId path, const at::Tensor& logits, const at::Tensor& targets,
                     const VocabSlice& vocab, at::ScalarType acc, double n_global, bool grad,
                     bool masked = false);

/// The LM loss table's row for logits of `x`'s device and type over `vocab`, for targets that
/// may be kIgnoreTarget when `masked` (NOTE [Kernel table]).
kernels::LossPathId loss_path_for(const at::Tensor& x, const VocabSlice& vocab,
                                  bool masked = false);

/// sum over rows r of cross_entropy(x[r] w^T, t[r]) / n_global, for hidden states x [n, C], head
/// rows w [v, C] (the slice `vocab` of the padded vocabulary) and targets t [n]: a float32 scalar
/// for float32 and lower x, else x's type. Differentiable in x and w (the gradients are computed
/// with the loss, chunk by chunk, and scaled by the loss's gradient in backward). Under
/// vocab-parallelism the rows' log-sum-exp and target logits are summed over `vocab.groups`, and
/// x's gradient is this slice's part (summed over the groups by the caller). `chunk_rows`: rows
/// per chunk (0: chunk_rows_for(n, vocab.real, chunk_budget(x))); `path`: the loss table's row
/// (default loss_path_for(x, vocab, masked)); the log-softmax rows need vocab.groups empty.
/// `masked`: targets may be kIgnoreTarget, rows that add nothing to the loss or the gradients.
at::Tensor linear_cross_entropy(const at::Tensor& x, const at::Tensor& w, const at::Tensor& t,
                                const VocabSlice& vocab, double n_global, int64_t chunk_rows = 0,
                                std::optional<kernels::LossPathId> path = std::nullopt,
                                bool masked = false);

/// The rows a chunk of linear_cross_entropy takes: its float32 logits [rows, columns] within
/// `budget` bytes (at least 1 row; all of them when they fit).
int64_t chunk_rows_for(int64_t rows, int64_t columns, int64_t budget);
/// The budget of a chunk's float32 logits on `x`'s device: 64 MiB on the CPU, 512 MiB on a GPU
/// (larger GEMMs, fewer launches).
int64_t chunk_budget(const at::Tensor& x);

}  // namespace vescale::local
