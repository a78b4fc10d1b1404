#include "parallel/grad_sync.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>

#include "core/error.h"

namespace vescale {

GradSync::GradSync(std::vector<DTensor*> params, std::vector<Replicas> replicas,
                   int64_t bucket_bytes, DpGrads dp_grads,
                   std::optional<at::ScalarType> reduce_dtype)
    : params_(std::move(params)),
      replicas_(std::move(replicas)),
      bucket_bytes_(bucket_bytes),
      dp_grads_(dp_grads),
      reduce_dtype_(reduce_dtype),
      piece_grads_(params_.size()),
      extra_sums_(params_.size()),
      where_(params_.size(), {kNoBucket, 0}),
      filled_(params_.size()) {
  VS_CHECK(replicas_.size() == params_.size(), "[parallel] replicas for {} of {} parameters",
           replicas_.size(), params_.size());
  for (Replicas& r : replicas_)
    if (r.nesting.empty() && r.group) r.nesting = {r.group->size()};
  hook_if_needed();
}

GradSync::GradSync(std::vector<DTensor*> params, std::optional<comm::Group> dp,
                   int64_t bucket_bytes, DpGrads dp_grads,
                   std::optional<at::ScalarType> reduce_dtype)
    : GradSync(params, std::vector<Replicas>(params.size()), bucket_bytes, dp_grads, reduce_dtype) {
  own_dp_ = std::move(dp);
  if (!own_dp_) return;
  for (Replicas& r : replicas_)
    r = {&*own_dp_, {own_dp_->size()}};
  hook_if_needed();
}

void GradSync::hook_if_needed() {
  // Nothing to reduce where every group is a single rank: no hooks, no buckets.
  bool any_group = false;
  for (size_t k = 0; k < params_.size(); ++k) {
    const comm::Group* group = replicas_[k].group;
    any_group = any_group || (group && group->size() > 1) || params_[k]->mesh().numel() > 1;
  }
  if (any_group) install_hooks();
}

bool GradSync::scatters(size_t k) const {
  const comm::Group* group = replicas_[k].group;
  return dp_grads_ != DpGrads::kAllReduce && group && group->size() > 1;
}

void GradSync::install_hooks() {
  if (hooked_) return;
  hooked_ = true;
  for (size_t k = 0; k < params_.size(); ++k) {
    params_[k]->to_local().register_hook([this, k](const at::Tensor& grad) { on_grad(k, grad); });
  }
}

void GradSync::add_sum(DTensor* param, comm::Group group) {
  const auto it = std::find(params_.begin(), params_.end(), param);
  VS_CHECK(it != params_.end(), "[parallel] add_sum: {} is not a parameter of this grad sync",
           param->str());
  if (group.size() == 1) return;
  extra_groups_.push_back(std::move(group));
  extra_sums_[static_cast<size_t>(it - params_.begin())].push_back(&extra_groups_.back());
  planned_ = false;
  install_hooks();
}

std::vector<GradSync::Reduction> GradSync::reductions_of(size_t k) const {
  // NOTE [Grad sync]: the replicas' average first (as DDP), then the Partial sums.
  std::vector<Reduction> out;
  const comm::Group* replicas = replicas_[k].group;
  if (replicas && replicas->size() > 1)
    out.push_back({replicas, comm::ReduceOp::kAvg, scatters(k)});
  std::vector<int> dims = params_[k]->partial_grad_dims();
  std::sort(dims.begin(), dims.end());
  for (int i : dims) {
    const comm::Group& group = params_[k]->mesh().group(i);
    if (group.size() > 1) out.push_back({&group, comm::ReduceOp::kSum});
  }
  for (const comm::Group* group : extra_sums_[k])
    out.push_back({group, comm::ReduceOp::kSum});
  return out;
}

void GradSync::plan_buckets() {
  std::vector<std::vector<int>> key(params_.size());
  for (size_t k = 0; k < params_.size(); ++k) {
    key[k] = params_[k]->partial_grad_dims();
    std::sort(key[k].begin(), key[k].end());
  }
  if (planned_ && key == layout_key_) return;
  planned_ = true;
  layout_key_ = key;
  buckets_.clear();
  std::fill(where_.begin(), where_.end(), std::make_pair(kNoBucket, size_t{0}));
  // Reverse parameter order (the order gradients become ready); gradients that need the same
  // reductions share an open bucket until it is full.
  std::vector<size_t> open;  // index of the open bucket per distinct reduction list
  for (size_t k = params_.size(); k-- > 0;) {
    const std::vector<Reduction> reductions = reductions_of(k);
    if (reductions.empty()) continue;
    const at::Tensor& p = params_[k]->to_local();
    const at::ScalarType dtype = reduce_dtype_.value_or(p.scalar_type());
    const int64_t element = static_cast<int64_t>(c10::elementSize(dtype));
    auto same = [&](size_t b) {
      const Bucket& bucket = buckets_[b];
      if (bucket.dtype != dtype) return false;
      if (bucket.reductions.size() != reductions.size()) return false;
      for (size_t r = 0; r < reductions.size(); ++r) {
        if (bucket.reductions[r].group != reductions[r].group ||
            bucket.reductions[r].op != reductions[r].op ||
            bucket.reductions[r].scatter != reductions[r].scatter)
          return false;
      }
      return true;
    };
    auto it = std::find_if(open.begin(), open.end(), [&](size_t b) { return same(b); });
    if (it != open.end() && (buckets_[*it].numel + p.numel()) * element > bucket_bytes_ &&
        buckets_[*it].numel > 0) {
      open.erase(it);
      it = open.end();
    }
    if (it == open.end()) {
      buckets_.emplace_back();
      buckets_.back().reductions = reductions;
      buckets_.back().dtype = dtype;
      open.push_back(buckets_.size() - 1);
      it = open.end() - 1;
    }
    Bucket& b = buckets_[*it];
    where_[k] = {*it, b.params.size()};
    b.params.push_back(k);
    b.offsets.push_back(b.numel);
    b.numel += p.numel();
  }
  for (auto& b : buckets_) {
    if (b.reductions.front().scatter) {
      std::vector<std::vector<FlatRange>> pieces;
      // A bucket's parameters share their first reduction: one group, one nesting.
      for (size_t k : b.params)
        pieces.push_back(
            dp_pieces(params_[k]->to_local().sizes().vec(), replicas_[b.params.front()].nesting));
      b.packing =
          std::make_shared<DpPacking>(std::move(pieces), b.reductions.front().group->size());
    } else {
      b.flat = at::zeros({b.numel}, params_[b.params.front()]->to_local().options().dtype(b.dtype));
    }
  }
}

void GradSync::reset_buckets() {
  plan_buckets();
  launched_in_backward_ = 0;
  std::fill(filled_.begin(), filled_.end(), false);
  for (auto& b : buckets_) {
    b.ready = 0;
    b.next_reduction = 0;
    b.work = comm::Work();
    b.piece = at::Tensor();
    if (b.packing) b.flat = at::Tensor();
  }
}

void GradSync::start_last_backward() {
  std::lock_guard<std::mutex> lock(mutex_);
  reset_buckets();
  // ZeRO-1 reduces after the backward: .grad tensors stay whole until then.
  armed_ = !buckets_.empty() && dp_grads_ != DpGrads::kScatterAfterBackward;
}

void GradSync::fill(size_t k, const at::Tensor& grad) {
  const auto [bucket, slot] = where_[k];
  Bucket& b = buckets_[bucket];
  const at::Tensor& p = params_[k]->to_local();
  // The gradient of this backward plus what earlier micro-batches accumulated.
  const at::Tensor& accumulated = p.grad();
  at::Tensor sum;
  if (grad.defined()) {
    sum = grad.reshape({-1});
    if (accumulated.defined()) sum = sum + accumulated.reshape({-1});
  } else if (accumulated.defined()) {
    sum = accumulated.reshape({-1});
  }
  if (b.packing) {
    // Made zeroed at the bucket's first fill: a parameter without a gradient leaves zeros.
    if (!b.flat.defined()) b.flat = at::zeros({b.packing->numel()}, p.options().dtype(b.dtype));
    if (sum.defined()) b.packing->pack(b.flat, slot, sum);
  } else {
    at::Tensor dst = b.flat.narrow(0, b.offsets[slot], p.numel());
    if (sum.defined()) {
      dst.copy_(sum);
    } else {
      dst.zero_();
    }
  }
  filled_[k] = true;
  ++b.ready;
}

void GradSync::release_grads(size_t keep) {
  for (size_t k : to_release_)
    params_[k]->to_local().mutable_grad() = at::Tensor();
  to_release_.clear();
  to_release_.push_back(keep);
}

void GradSync::on_grad(size_t k, const at::Tensor& grad) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!armed_ || filled_[k] || where_[k].first == kNoBucket) return;
  torch::autograd::AutoGradMode no_grad(false);
  fill(k, grad);
  // Autograd stores this gradient in .grad after the hook: drop the previous ones.
  if (dp_grads_ == DpGrads::kScatterInBackward && buckets_[where_[k].first].packing)
    release_grads(k);
  launch_ready();
}

void GradSync::launch_next(Bucket& b) {
  const Reduction& r = b.reductions[b.next_reduction++];
  // NOTE [Flight recorder]: the bucket's collectives say which bucket they reduce.
  const comm::FlightSite site(*r.group->flight(), fmt::format("bucket {}", &b - buckets_.data()));
  if (r.scatter) {
    // Synchronous: Gloo has no reduce-scatter of its own (comm builds one from an all-to-all).
    b.piece = r.group->reduce_scatter(b.flat, 0, r.op);
    b.flat = at::Tensor();
    b.work = comm::Work();
    return;
  }
  at::Tensor& target = b.piece.defined() ? b.piece : b.flat;
  b.work = r.group->all_reduce_async(target, r.op);
}

void GradSync::launch_ready() {
  // Strictly in bucket order, so that every rank issues the same collectives in the same order.
  for (auto& b : buckets_) {
    if (b.next_reduction > 0) continue;
    if (b.ready < static_cast<int>(b.params.size())) return;
    launch_next(b);
    ++launched_in_backward_;
  }
}

int GradSync::finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  torch::autograd::AutoGradMode no_grad(false);
  if (!armed_) reset_buckets();
  const int overlapped = launched_in_backward_;
  // First reductions the hooks did not launch (parameters without a gradient this backward).
  for (auto& b : buckets_) {
    if (b.next_reduction > 0) continue;
    for (size_t k : b.params) {
      if (!filled_[k]) fill(k, at::Tensor());
    }
    launch_next(b);
  }
  // Further reductions, chained per bucket in bucket order.
  for (auto& b : buckets_) {
    while (b.next_reduction < b.reductions.size()) {
      b.work.wait();
      launch_next(b);
    }
  }
  for (auto& b : buckets_) {
    b.work.wait();
    for (size_t slot = 0; slot < b.params.size(); ++slot)
      write_back(b, slot);
  }
  to_release_.clear();
  // Every gradient now has its parameter's placements (a partial sum over one rank is whole).
  for (DTensor* p : params_)
    p->mark_grad_reduced();
  armed_ = false;
  return overlapped;
}

void GradSync::write_back(Bucket& b, size_t slot) {
  const size_t k = b.params[slot];
  const at::Tensor& p = params_[k]->to_local();
  if (!b.packing) {
    // A view of the bucket, whose next fill is after the next step's zero_grad() drops it: no
    // second copy of every gradient.
    const at::Tensor reduced = b.flat.narrow(0, b.offsets[slot], p.numel());
    if (b.dtype == p.scalar_type()) {
      p.mutable_grad() = reduced.view_as(p);
    } else {
      // Reduced in a wider type (mixed precision): the optimizer takes it as it is.
      p.mutable_grad() = at::Tensor();
      piece_grads_[k] = reduced;
    }
    return;
  }
  const int64_t rank = b.reductions.front().group->rank();
  const at::Tensor piece = b.packing->in_segment(b.piece, slot, rank);
  if (dp_grads_ == DpGrads::kScatterInBackward) {
    p.mutable_grad() = at::Tensor();
    piece_grads_[k] = piece;
    return;
  }
  // ZeRO-1: the whole buffer stays (the backward's, zeroed: it was packed and scattered); the
  // rank's rows hold the reduced gradient.
  const FlatRange& range = b.packing->piece(slot, rank);
  at::Tensor& whole = p.mutable_grad();
  if (whole.defined() && whole.sizes() == p.sizes() && whole.is_contiguous()) {
    whole.zero_();
  } else {
    whole = at::zeros_like(p);
  }
  if (b.dtype != p.scalar_type()) {
    piece_grads_[k] = piece;
    return;
  }
  piece_grads_[k] = p.mutable_grad().view({-1}).narrow(0, range.offset, range.numel);
  piece_grads_[k].copy_(piece);
}

at::Tensor GradSync::piece_grad(size_t k) const {
  if (piece_grads_[k].defined()) return piece_grads_[k];
  const at::Tensor& g = params_[k]->to_local().grad();
  return g.defined() ? g.view({-1}) : g;
}

int64_t GradSync::grad_bytes() const {
  int64_t total = 0;
  for (size_t k = 0; k < params_.size(); ++k) {
    const at::Tensor& g = params_[k]->to_local().grad();
    if (g.defined()) total += static_cast<int64_t>(g.nbytes());
  }
  for (const auto& b : buckets_) {
    if (b.packing && b.flat.defined()) total += static_cast<int64_t>(b.flat.nbytes());
    // The rank's segment, unless ZeRO-1 copied it into .grad (counted above).
    const bool piece_held =
        dp_grads_ == DpGrads::kScatterInBackward || b.dtype != params_[b.params.front()]->dtype();
    if (b.piece.defined() && piece_held) total += static_cast<int64_t>(b.piece.nbytes());
    if (b.packing) continue;
    for (size_t k : b.params)  // reduced in a wider type (mixed precision): each its own tensor
      if (piece_grads_[k].defined()) total += static_cast<int64_t>(piece_grads_[k].nbytes());
  }
  return total;
}

void GradSync::zero_grad() {
  for (DTensor* p : params_)
    p->zero_grad();
  std::fill(piece_grads_.begin(), piece_grads_.end(), at::Tensor());
  for (auto& b : buckets_)
    b.piece = at::Tensor();
}

}  // namespace vescale
