// NOTE [Adjacent runs]
// The optimizer phase is a few elementwise passes over every parameter: clipping's scale, the
// AdamW update, the master weights' copy into the bf16 parameters. Run per tensor, each pass is a
// kernel launch per parameter (hundreds a step on a GPU, with the device idle between small
// ones). So the buffers of that phase are flat: the optimizer's state, the master weights and
// their float32 gradients are carved out of one buffer per dtype, and a bf16 job's parameters
// out of one buffer (parallel_model.cpp), each by a FlatLayout (optim/flat_layout.h) in the one
// order flat_order() gives (the views with weight decay first). Where consecutive tensors of a
// pass lie end to end in one storage, one view covers them and the pass runs once over it. The
// numbers are the same bit for bit: each element's update depends on that element alone
// (optimizer_test runs AdamW on split and merged views; scripts/curves.sh compares whole runs).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <vector>

namespace vescale {

/// Whether `next` starts where `prev` ends in the same storage, both flat (1-D, contiguous) and of
/// one dtype: a view from prev's first element covers both.
bool follows(const at::Tensor& prev, const at::Tensor& next);

/// `lists`: parallel lists of flat tensors, equally long (a pass's operands: values, gradients,
/// moments). Orders the entries by where list 0's tensor lies (its storage, then its offset), then
/// merges each run of consecutive entries that follow one another in every list into one view.
/// For passes whose result does not depend on the order of the entries.
std::vector<std::vector<at::Tensor>> merge_adjacent(std::vector<std::vector<at::Tensor>> lists);
/// merge_adjacent() of one list.
std::vector<at::Tensor> merge_adjacent(std::vector<at::Tensor> tensors);

}  // namespace vescale
