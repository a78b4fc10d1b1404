#include "optim/adjacent_runs.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>

#include "core/error.h"

namespace vescale {

bool follows(const at::Tensor& prev, const at::Tensor& next) {
  return prev.defined() && next.defined() && prev.dim() == 1 && next.dim() == 1 &&
         prev.is_contiguous() && next.is_contiguous() && prev.scalar_type() == next.scalar_type() &&
         prev.device() == next.device() &&
         prev.storage().unsafeGetStorageImpl() == next.storage().unsafeGetStorageImpl() &&
         next.storage_offset() == prev.storage_offset() + prev.numel();
}

std::vector<std::vector<at::Tensor>> merge_adjacent(std::vector<std::vector<at::Tensor>> lists) {
  if (lists.empty() || lists.front().empty()) return lists;
  const size_t n = lists.front().size();
  for (const auto& list : lists)
    VS_CHECK(list.size() == n, "[optim] merge_adjacent: lists of {} and {} tensors", n,
             list.size());
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  const auto place = [&](size_t i) {
    const at::Tensor& t = lists.front()[i];
    return std::make_tuple(reinterpret_cast<uintptr_t>(t.storage().unsafeGetStorageImpl()),
                           t.storage_offset());
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return place(a) < place(b); });
  std::vector<std::vector<at::Tensor>> merged(lists.size());
  size_t start = 0;
  while (start < n) {
    size_t end = start + 1;
    int64_t numel = lists.front()[order[start]].numel();
    while (end < n && std::all_of(lists.begin(), lists.end(), [&](const auto& list) {
             return follows(list[order[end - 1]], list[order[end]]);
           })) {
      numel += lists.front()[order[end]].numel();
      ++end;
    }
    for (size_t l = 0; l < lists.size(); ++l) {
      const at::Tensor& first = lists[l][order[start]];
      merged[l].push_back(
          end == start + 1 ? first : first.as_strided({numel}, {1}, first.storage_offset()));
    }
    start = end;
  }
  return merged;
}

std::vector<at::Tensor> merge_adjacent(std::vector<at::Tensor> tensors) {
  return std::move(
      merge_adjacent(std::vector<std::vector<at::Tensor>>{std::move(tensors)}).front());
}

}  // namespace vescale
