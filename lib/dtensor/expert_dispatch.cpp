#include "dtensor/expert_dispatch.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <numeric>

#include "core/error.h"
#include "dtensor/custom_backward.h"
#include "kernels/kernel_table.h"

namespace vescale {
namespace {

/// `rows` [sum of send, C] sent in blocks of send[r] rows to rank r; returns what arrived, blocks
/// of recv[r] rows from rank r in rank order.
at::Tensor exchange_rows(const comm::Group& group, const at::Tensor& rows,
                         const std::vector<int64_t>& send, const std::vector<int64_t>& recv) {
  const int64_t width = rows.size(1);
  std::vector<at::Tensor> inputs;
  std::vector<std::vector<int64_t>> shapes;
  int64_t offset = 0;
  for (size_t r = 0; r < send.size(); ++r) {
    inputs.push_back(rows.narrow(0, offset, send[r]));
    offset += send[r];
    shapes.push_back({recv[r], width});
  }
  return at::cat(group.all_to_all(inputs, shapes));
}

/// exchange_rows, differentiable: its backward sends the gradients back the same way.
at::Tensor all_to_all_rows(const at::Tensor& x, const std::vector<int64_t>& send,
                           const std::vector<int64_t>& recv, const comm::Group& group) {
  const comm::Group* g = &group;
  return detail::with_custom_backward(
      x, [&](const at::Tensor& in) { return exchange_rows(*g, in.contiguous(), send, recv); },
      [g, send, recv](const at::Tensor& grad) {
        return exchange_rows(*g, grad.contiguous(), recv, send);
      },
      "ExpertAllToAll");
}

}  // namespace

at::Tensor dispatch_to_experts(const at::Tensor& h, const std::vector<int64_t>& counts,
                               const std::vector<ExpertWeights>& local,
                               const ExpertPlacement& placement) {
  const int64_t ranks = placement.ranks(), per_rank = placement.count();
  VS_CHECK(static_cast<int64_t>(counts.size()) == placement.total &&
               static_cast<int64_t>(local.size()) == per_rank && placement.total % ranks == 0,
           "[dtensor] dispatch_to_experts: {} counts and {} local experts of {} over {} ranks",
           counts.size(), local.size(), placement.total, ranks);
  if (ranks == 1) return kernels::run_experts(h, at::tensor(counts, at::kLong), local);
  const comm::Group& group = *placement.ep;
  // 1. The counts, each rank's block of experts to that rank; one host read of what arrived.
  const at::Tensor mine = at::tensor(counts, at::kLong).to(h.device());
  std::vector<at::Tensor> outgoing;
  std::vector<std::vector<int64_t>> shapes;
  for (int64_t r = 0; r < ranks; ++r) {
    outgoing.push_back(mine.narrow(0, r * per_rank, per_rank));
    shapes.push_back({per_rank});
  }
  const at::Tensor arrived = at::stack(group.all_to_all(outgoing, shapes)).cpu();  // [ranks, L]
  const auto* from = arrived.data_ptr<int64_t>();
  std::vector<int64_t> send(static_cast<size_t>(ranks)), recv(static_cast<size_t>(ranks));
  for (int64_t r = 0; r < ranks; ++r) {
    send[r] = std::accumulate(counts.begin() + r * per_rank, counts.begin() + (r + 1) * per_rank,
                              int64_t{0});
    recv[r] = std::accumulate(from + r * per_rank, from + (r + 1) * per_rank, int64_t{0});
  }
  // 2. The rows, to their experts' ranks.
  const at::Tensor received = all_to_all_rows(h, send, recv, group);
  // 3. By expert, source by source (as one process orders its rows), through the experts, whose
  // weights take 1 / ep of the gradient (NOTE [Expert parallelism]).
  // next[r]: where source r's rows for the current expert start in what arrived (each source's
  // block is ordered by expert).
  std::vector<int64_t> order, local_counts(static_cast<size_t>(per_rank), 0);
  std::vector<int64_t> next(static_cast<size_t>(ranks), 0);
  for (int64_t r = 1; r < ranks; ++r)
    next[r] = next[r - 1] + recv[r - 1];
  for (int64_t e = 0; e < per_rank; ++e) {
    for (int64_t r = 0; r < ranks; ++r) {
      const int64_t rows = from[r * per_rank + e];
      for (int64_t i = 0; i < rows; ++i)
        order.push_back(next[r] + i);
      next[r] += rows;
      local_counts[e] += rows;
    }
  }
  const at::Tensor by_expert = at::tensor(order, at::kLong).to(h.device());
  const at::Tensor y =
      kernels::run_experts(received.index_select(0, by_expert), at::tensor(local_counts, at::kLong),
                           local, 1.0 / static_cast<double>(ranks));
  // 4. Back in the order they arrived, and to the ranks they came from.
  const at::Tensor arrival = at::argsort(by_expert);
  return all_to_all_rows(y.index_select(0, arrival), recv, send, group);
}

std::vector<int64_t> expert_dispatch_bytes(const std::vector<std::vector<int64_t>>& counts,
                                           int64_t row_bytes) {
  const auto ranks = static_cast<int64_t>(counts.size());
  const auto total = static_cast<int64_t>(counts.at(0).size());
  const int64_t per_rank = total / ranks;
  std::vector<int64_t> bytes;
  for (int64_t r = 0; r < ranks; ++r) {
    int64_t rows = 0;
    for (int64_t e = 0; e < total; ++e) {
      const bool local = e / per_rank == r;
      if (!local) rows += counts[r][e];  // sent to e's rank
      if (local) {
        for (int64_t s = 0; s < ranks; ++s)
          if (s != r) rows += counts[s][e];  // results sent back to rank s
      }
    }
    bytes.push_back((ranks - 1) * per_rank * static_cast<int64_t>(sizeof(int64_t)) +
                    rows * row_bytes);
  }
  return bytes;
}

}  // namespace vescale
