#include "parallel/data_parallel.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "core/error.h"

namespace vescale {

DataParallel::DataParallel(std::vector<DTensor*> params, comm::Group dp_group, int64_t bucket_bytes)
    : params_(std::move(params)),
      group_(std::move(dp_group)),
      where_(params_.size()),
      filled_(params_.size()) {
  if (group_.size() == 1) return;
  for (size_t k = params_.size(); k-- > 0;) {
    const at::Tensor& p = params_[k]->to_local();
    const int64_t bytes = p.numel() * static_cast<int64_t>(p.element_size());
    if (buckets_.empty() ||
        buckets_.back().numel * static_cast<int64_t>(p.element_size()) + bytes > bucket_bytes ||
        buckets_.back().flat.scalar_type() != p.scalar_type()) {
      buckets_.emplace_back();
      buckets_.back().flat = at::empty({0}, p.options());
    }
    Bucket& b = buckets_.back();
    where_[k] = {buckets_.size() - 1, b.params.size()};
    b.params.push_back(k);
    b.offsets.push_back(b.numel);
    b.numel += p.numel();
  }
  for (auto& b : buckets_)
    b.flat = at::zeros({b.numel}, b.flat.options());
  for (size_t k = 0; k < params_.size(); ++k) {
    params_[k]->to_local().register_hook([this, k](const at::Tensor& grad) { on_grad(k, grad); });
  }
}

void DataParallel::arm() {
  std::lock_guard<std::mutex> lock(mutex_);
  armed_ = group_.size() > 1;
  launched_in_backward_ = 0;
  std::fill(filled_.begin(), filled_.end(), false);
  for (auto& b : buckets_) {
    b.ready = 0;
    b.launched = false;
  }
}

void DataParallel::fill(size_t k, const at::Tensor& grad) {
  const auto [bucket, slot] = where_[k];
  Bucket& b = buckets_[bucket];
  at::Tensor dst = b.flat.narrow(0, b.offsets[slot], params_[k]->to_local().numel());
  // The gradient of this backward plus what earlier micro-batches accumulated.
  const at::Tensor& accumulated = params_[k]->to_local().grad();
  if (grad.defined()) {
    dst.copy_(grad.reshape({-1}));
    if (accumulated.defined()) dst.add_(accumulated.reshape({-1}));
  } else if (accumulated.defined()) {
    dst.copy_(accumulated.reshape({-1}));
  } else {
    dst.zero_();
  }
  filled_[k] = true;
  ++b.ready;
}

void DataParallel::on_grad(size_t k, const at::Tensor& grad) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!armed_ || filled_[k]) return;
  torch::autograd::AutoGradMode no_grad(false);
  fill(k, grad);
  launch_ready();
}

void DataParallel::launch_ready() {
  // Strictly in bucket order, so that every dp rank issues the same collectives in the same order.
  for (auto& b : buckets_) {
    if (b.launched) continue;
    if (b.ready < static_cast<int>(b.params.size())) return;
    b.work = group_.all_reduce_async(b.flat, comm::ReduceOp::kAvg);
    b.launched = true;
    ++launched_in_backward_;
  }
}

int DataParallel::finish() {
  if (group_.size() == 1) return 0;
  std::lock_guard<std::mutex> lock(mutex_);
  VS_CHECK(armed_, "[parallel] DataParallel::finish without arm()");
  torch::autograd::AutoGradMode no_grad(false);
  const int overlapped = launched_in_backward_;
  for (auto& b : buckets_) {
    if (b.launched) continue;
    for (size_t slot = 0; slot < b.params.size(); ++slot) {
      if (!filled_[b.params[slot]]) fill(b.params[slot], at::Tensor());
    }
    b.work = group_.all_reduce_async(b.flat, comm::ReduceOp::kAvg);
    b.launched = true;
  }
  for (auto& b : buckets_) {
    b.work.wait();
    for (size_t slot = 0; slot < b.params.size(); ++slot) {
      const at::Tensor& p = params_[b.params[slot]]->to_local();
      p.mutable_grad() = b.flat.narrow(0, b.offsets[slot], p.numel()).view_as(p).clone();
    }
  }
  armed_ = false;
  return overlapped;
}

}  // namespace vescale
