// Where each of a list of tensors lies in one flat buffer (NOTE [Adjacent runs]): the optimizer's
// state, the master weights and their float32 gradients, and a bf16 job's parameters are carved
// out of flat buffers by one FlatLayout each, all in flat_order(), so that consecutive pieces of
// every pass lie end to end and merge into one run. Change the order here and every buffer
// follows it.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "optim/param_view.h"

namespace vescale {

/// The order in which entries are laid out: those with weight decay (`decays[k]`) first, each part
/// in the entries' order (AdamW steps the two parts apart, so each part merges into one run).
std::vector<size_t> flat_order(const std::vector<bool>& decays);
/// flat_order() of views, by their weight_decay.
std::vector<size_t> flat_order(const std::vector<ParamView>& views);

class FlatLayout {
 public:
  /// Entry k of `numels[k]` elements; `order` lists the entries in the order they lie.
  FlatLayout(const std::vector<int64_t>& numels, const std::vector<size_t>& order);
  /// The entries of `views` (their values' elements) in flat_order(views).
  explicit FlatLayout(const std::vector<ParamView>& views);

  /// Elements of all entries: a buffer's size.
  int64_t total() const { return total_; }
  /// Entry k's elements of `buffer` (flat, total() elements), shaped `sizes` (default: flat): a
  /// tensor on the buffer's storage, not an autograd view of it.
  at::Tensor piece(const at::Tensor& buffer, size_t k, at::IntArrayRef sizes = {}) const;

 private:
  std::vector<int64_t> numels_, offsets_;
  int64_t total_ = 0;
};

/// A zero tensor shaped as each view's values, flat, carved in flat_order() out of one buffer per
/// dtype and device of the values: an optimizer state of `views`.
std::vector<at::Tensor> flat_zeros(const std::vector<ParamView>& views);

}  // namespace vescale
