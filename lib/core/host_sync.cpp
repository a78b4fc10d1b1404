#include "core/host_sync.h"

#include <ATen/ATen.h>

#include <atomic>

namespace vescale {
namespace {

std::atomic<int64_t> syncs{0};

}  // namespace

std::vector<double> host_values(const at::Tensor& values) {
  syncs.fetch_add(1, std::memory_order_relaxed);
  const at::Tensor host = values.detach().to(at::kCPU, at::kDouble).contiguous().view({-1});
  return std::vector<double>(host.data_ptr<double>(), host.data_ptr<double>() + host.numel());
}

int64_t host_syncs() {
  return syncs.load(std::memory_order_relaxed);
}

}  // namespace vescale
