#include "optim/flat_layout.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <string>
#include <utility>

#include "core/error.h"

namespace vescale {

std::vector<size_t> flat_order(const std::vector<bool>& decays) {
  std::vector<size_t> order(decays.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_partition(order.begin(), order.end(), [&](size_t k) { return decays[k]; });
  return order;
}

std::vector<size_t> flat_order(const std::vector<ParamView>& views) {
  std::vector<bool> decays;
  for (const ParamView& view : views)
    decays.push_back(view.weight_decay);
  return flat_order(decays);
}

FlatLayout::FlatLayout(const std::vector<int64_t>& numels, const std::vector<size_t>& order)
    : numels_(numels), offsets_(numels.size(), -1) {
  VS_CHECK(order.size() == numels.size(), "[optim] a flat layout of {} entries in an order of {}",
           numels.size(), order.size());
  for (size_t k : order) {
    VS_CHECK(k < numels.size() && offsets_[k] < 0, "[optim] flat layout order: entry {} of {}", k,
             numels.size());
    offsets_[k] = total_;
    total_ += numels[k];
  }
}

namespace {

std::vector<int64_t> value_numels(const std::vector<ParamView>& views) {
  std::vector<int64_t> out;
  for (const ParamView& view : views)
    out.push_back(view.value().numel());
  return out;
}

}  // namespace

FlatLayout::FlatLayout(const std::vector<ParamView>& views)
    : FlatLayout(value_numels(views), flat_order(views)) {}

at::Tensor FlatLayout::piece(const at::Tensor& buffer, size_t k, at::IntArrayRef sizes) const {
  VS_CHECK(buffer.dim() == 1 && buffer.numel() == total_,
           "[optim] a flat layout of {} elements carves a buffer of {}", total_, buffer.numel());
  const std::vector<int64_t> flat = {numels_.at(k)};
  at::Tensor out = at::empty({0}, buffer.options());
  out.set_(buffer.storage(), buffer.storage_offset() + offsets_[k],
           sizes.empty() ? at::IntArrayRef(flat) : sizes);
  VS_CHECK(out.numel() == numels_[k], "[optim] flat layout entry {} of {} elements as {}", k,
           numels_[k], sizes);
  return out;
}

std::vector<at::Tensor> flat_zeros(const std::vector<ParamView>& views) {
  std::map<std::pair<at::ScalarType, std::string>, std::vector<size_t>> groups;
  for (size_t k : flat_order(views)) {
    const at::Tensor& value = views[k].value();
    groups[{value.scalar_type(), value.device().str()}].push_back(k);
  }
  std::vector<at::Tensor> out(views.size());
  for (const auto& [key, members] : groups) {
    std::vector<int64_t> numels;
    for (size_t k : members)
      numels.push_back(views[k].value().numel());
    std::vector<size_t> in_turn(members.size());
    std::iota(in_turn.begin(), in_turn.end(), size_t{0});
    const FlatLayout layout(numels, in_turn);
    const at::Tensor buffer = at::zeros({layout.total()}, views[members.front()].value().options());
    for (size_t i = 0; i < members.size(); ++i)
      out[members[i]] = layout.piece(buffer, i);
  }
  return out;
}

}  // namespace vescale
