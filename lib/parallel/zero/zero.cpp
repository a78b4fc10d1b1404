#include "parallel/zero/zero.h"

#include <ATen/ATen.h>
#include <c10/core/StorageImpl.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <c10/util/accumulate.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/error.h"

namespace vescale {
namespace {

// NOTE [ZeRO-3 storage]
// A ZeRO-3 parameter keeps its local tensor (the autograd leaf with its hooks, shape and version
// counter) but not its memory: free() drops the storage's bytes, allocate() gives it fresh ones
// that the all-gather fills through an alias, a second tensor on the same storage with its own
// version counter. Autograd's saved copies of the leaf see the gathered values at backward, and
// its in-place checks see no change. Outside a layer's forward or backward the data is absent.

void free_storage(const at::Tensor& t) {
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(at::DataPtr(nullptr, t.device()));
  storage->set_nbytes(0);
}

/// Allocates `t`'s storage again and returns a flat alias of it for writing.
at::Tensor allocate_storage(const at::Tensor& t) {
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  VS_CHECK(storage->allocator() != nullptr, "[zero] a parameter storage without an allocator");
  const size_t bytes = static_cast<size_t>(t.numel()) * t.element_size();
  storage->set_data_ptr_noswap(storage->allocator()->allocate(bytes));
  storage->set_nbytes(bytes);
  return at::empty({0}, t.options()).set_(t.storage(), 0, {t.numel()}, {1});
}

int64_t storage_bytes(const at::Tensor& t) {
  return static_cast<int64_t>(t.storage().nbytes());
}

}  // namespace

DpGrads Zero::dp_grads(int stage) {
  if (stage == 0) return DpGrads::kAllReduce;
  return stage == 1 ? DpGrads::kScatterAfterBackward : DpGrads::kScatterInBackward;
}

Zero::Zero(int stage, std::vector<std::pair<std::string, DTensor*>> params,
           const std::vector<JobMesh::ParamDims>& param_dims, const JobMesh& mesh,
           const GradSync& grad_sync, int64_t bucket_bytes)
    : stage_(stage), params_(std::move(params)), grad_sync_(grad_sync) {
  VS_CHECK(stage >= 1 && stage <= 3, "[zero] stage {} (1, 2 or 3)", stage);
  VS_CHECK(param_dims.size() == params_.size(), "[zero] dims of {} of {} parameters",
           param_dims.size(), params_.size());
  for (size_t k = 0; k < params_.size(); ++k) {
    const auto& [fqn, p] = params_[k];
    VS_USER_CHECK(p->ndim() > 0, "[zero] parameter {} has no dims: ZeRO splits rows over dp", fqn);
    const at::Tensor& local = p->to_local();
    VS_CHECK(local.is_contiguous(), "[zero] parameter {} is not contiguous", fqn);
    // NOTE [Dims by role]: split over the dims its gradient is averaged over.
    const JobMesh::ParamDims& dims = param_dims[k];
    replicas_.push_back(&mesh.replicas_of(dims.averaged));
    splits_ = splits_ || replicas_.back()->size() > 1;
    pieces_.push_back(dp_pieces(local.sizes().vec(), dims.averaged_sizes));
    specs_.push_back(dp_piece_spec(p->spec().on_mesh(mesh.mesh()), dims.averaged));
    // The spec's box and the flat rows must be the same elements (NOTE [ZeRO pieces]).
    const int64_t rank = replicas_.back()->rank();
    const FlatRange& mine = pieces_.back()[rank];
    const int64_t row = local.dim() > 1 ? local.numel() / std::max<int64_t>(local.size(0), 1) : 1;
    const int64_t row_offset = specs_.back().local_offset()[0] - p->spec().local_offset()[0];
    VS_CHECK(row_offset * row == mine.offset &&
                 c10::multiply_integers(specs_.back().local_shape()) == mine.numel,
             "[zero] {}: the rows of dp rank {} ({} at {}) are not the box of {}", fqn, rank,
             mine.numel, mine.offset, specs_.back().str());
  }
  bucket_params(bucket_bytes);
  if (shards_params()) to_pieces();
}

void Zero::bucket_params(int64_t bucket_bytes) {
  int64_t filled = 0;
  for (size_t k = 0; k < params_.size(); ++k) {
    const at::Tensor& local = params_[k].second->to_local();
    // A bucket is gathered by one all-gather: one dtype, one group of replicas.
    const size_t first = buckets_.empty() ? k : buckets_.back().front();
    const bool same_kind = !buckets_.empty() && replicas_[first] == replicas_[k] &&
                           params_[first].second->to_local().scalar_type() == local.scalar_type();
    if (buckets_.empty() || !same_kind ||
        filled + static_cast<int64_t>(local.nbytes()) > bucket_bytes) {
      buckets_.emplace_back();
      filled = 0;
    }
    buckets_.back().push_back(k);
    filled += static_cast<int64_t>(local.nbytes());
  }
}

std::vector<ParamView> Zero::optimizer_views() const {
  std::vector<ParamView> views;
  for (size_t k = 0; k < params_.size(); ++k) {
    const auto& [fqn, p] = params_[k];
    const FlatRange& mine = pieces_[k][replicas_[k]->rank()];
    const GradSync* sync = &grad_sync_;
    auto grad = [sync, k] { return sync->piece_grad(k); };
    if (shards_params()) {
      // The whole tensor has no memory now: the view is the rows' own tensor.
      views.push_back(
          ParamView{fqn, rows_[k], grad, specs_[k], takes_weight_decay(p->ndim()), mine.offset});
      continue;
    }
    ParamView view = ParamView::range(fqn, p, mine.offset, mine.numel, specs_[k]);
    view.flat_grad = grad;
    views.push_back(std::move(view));
  }
  return views;
}

at::Tensor Zero::piece(size_t k) const {
  if (shards_params()) return rows_[k];
  const FlatRange& mine = pieces_[k][replicas_[k]->rank()];
  return params_[k].second->to_local().detach().view({-1}).narrow(0, mine.offset, mine.numel);
}

void Zero::after_update() {
  if (shards_params()) {
    // Whole copies gathered before the update are stale: the next forward gathers again.
    finish_prefetch();
    for (size_t k = 0; k < params_.size(); ++k)
      release(k);
    return;
  }
  if (stage_ == 3 || !splits_) return;
  torch::autograd::AutoGradMode no_grad(false);
  for (const auto& bucket : buckets_) {
    Gather g = start_all_gather(bucket);
    g.work.wait();
    for (size_t i = 0; i < bucket.size(); ++i) {
      at::Tensor flat = params_[bucket[i]].second->to_local().detach().view({-1});
      g.packing->unpack(g.packed, i, flat);
    }
  }
}

Zero::Gather Zero::start_all_gather(std::vector<size_t> params) {
  Gather g;
  g.params = std::move(params);
  const comm::Group& group = *replicas_[g.params.front()];
  std::vector<std::vector<FlatRange>> pieces;
  for (size_t k : g.params) {
    VS_CHECK(replicas_[k] == &group, "[zero] one all-gather over parameters of other replicas");
    pieces.push_back(pieces_[k]);
  }
  g.packing = std::make_shared<DpPacking>(std::move(pieces), group.size());
  const at::TensorOptions options = piece(g.params.front()).options();
  g.segment = at::zeros({g.packing->segment()}, options);
  for (size_t i = 0; i < g.params.size(); ++i)
    g.packing->in_segment(g.segment, i, group.rank()).copy_(piece(g.params[i]));
  g.packed = at::empty({g.packing->numel()}, options);
  g.work = group.all_gather_async(g.segment, g.packed);
  return g;
}

// ---------------------------------------------------------------------------------------------
// Stage 3

void Zero::to_pieces() {
  torch::autograd::AutoGradMode no_grad(false);
  whole_.assign(params_.size(), true);
  for (size_t k = 0; k < params_.size(); ++k) {
    const FlatRange& mine = pieces_[k][replicas_[k]->rank()];
    const at::Tensor& local = params_[k].second->to_local();
    rows_.push_back(local.detach().view({-1}).narrow(0, mine.offset, mine.numel).clone());
    gathered_bytes_ += storage_bytes(local);
    release(k);
    // The gradient has arrived: every use of the whole tensor in this backward is done.
    local.register_hook([this, k](const at::Tensor&) { release(k); });
  }
}

std::vector<Zero::Gather> Zero::start_gather(const std::vector<size_t>& params) {
  torch::autograd::AutoGradMode no_grad(false);
  std::vector<std::pair<const comm::Group*, std::vector<size_t>>> absent;  // by group
  for (size_t k : params) {
    if (whole_[k]) continue;
    auto it = std::find_if(absent.begin(), absent.end(),
                           [&](const auto& a) { return a.first == replicas_[k]; });
    if (it == absent.end()) it = absent.insert(absent.end(), {replicas_[k], {}});
    it->second.push_back(k);
  }
  std::vector<Gather> out;
  for (auto& [group, members] : absent) {
    out.push_back(start_all_gather(std::move(members)));
    // The receiving buffer is a whole copy of these parameters already.
    gathered_bytes_ += storage_bytes(out.back().packed);
  }
  peak_gathered_bytes_ = std::max(peak_gathered_bytes_, gathered_bytes_);
  return out;
}

void Zero::finish_gather(Gather& g) {
  torch::autograd::AutoGradMode no_grad(false);
  g.work.wait();
  for (size_t i = 0; i < g.params.size(); ++i) {
    const size_t k = g.params[i];
    if (whole_[k]) continue;
    at::Tensor alias = allocate_storage(params_[k].second->to_local());
    g.packing->unpack(g.packed, i, alias);
    whole_[k] = true;
    gathered_bytes_ += storage_bytes(alias);
  }
  peak_gathered_bytes_ = std::max(peak_gathered_bytes_, gathered_bytes_);
  gathered_bytes_ -= storage_bytes(g.packed);
}

void Zero::finish_prefetch() {
  std::vector<Gather> gathers = std::move(prefetched_);
  prefetched_.clear();
  for (Gather& g : gathers)
    finish_gather(g);
}

void Zero::gather(const std::vector<size_t>& params) {
  finish_prefetch();
  for (Gather& g : start_gather(params))
    finish_gather(g);
}

void Zero::prefetch(const std::vector<size_t>& params) {
  finish_prefetch();
  prefetched_ = start_gather(params);
}

void Zero::release(size_t k) {
  if (!whole_[k]) return;
  const at::Tensor& local = params_[k].second->to_local();
  gathered_bytes_ -= storage_bytes(local);
  free_storage(local);
  whole_[k] = false;
}

void Zero::set_layers(std::vector<std::vector<size_t>> layer_params) {
  layers_ = std::move(layer_params);
}

Tensors Zero::run_layers(int64_t first, int64_t end, const Tensors& inputs,
                         const ForwardContext& context, const LayerRunner& run) {
  if (!shards_params()) return run(first, end, inputs, context);
  VS_CHECK(end <= static_cast<int64_t>(layers_.size()),
           "[zero] layers [{}, {}) but {} layers were set", first, end, layers_.size());
  Tensors x = inputs;
  auto layer = [this](int64_t i) -> const std::vector<size_t>& {
    return layers_[static_cast<size_t>(i)];
  };
  for (int64_t i = first; i < end; ++i) {
    gather(layer(i));
    // The next layer's all-gather runs while this one computes.
    if (i + 1 < end) prefetch(layer(i + 1));
    x = run(i, i + 1, x, context);
    const at::Tensor& out = x.at(0).to_local();
    if (out.requires_grad()) {
      // Before the layer's backward (the gradient of its output has arrived): gather it, and
      // start on the layer below, whose backward comes next.
      out.register_hook([this, i, first, layer](const at::Tensor&) {
        gather(layer(i));
        if (i > first) prefetch(layer(i - 1));
      });
    }
    // A parameter a later layer uses again (a tied weight) stays whole until that one is done.
    std::set<size_t> later;
    for (int64_t j = i + 1; j < end; ++j)
      later.insert(layers_[static_cast<size_t>(j)].begin(), layers_[static_cast<size_t>(j)].end());
    for (size_t k : layers_[static_cast<size_t>(i)]) {
      if (!later.count(k)) release(k);
    }
  }
  return x;
}

int64_t Zero::param_bytes() const {
  int64_t total = 0;
  for (size_t k = 0; k < params_.size(); ++k) {
    total += storage_bytes(params_[k].second->to_local());
    if (shards_params()) total += static_cast<int64_t>(rows_[k].nbytes());
  }
  return total;
}

int64_t Zero::largest_layer_bytes() const {
  int64_t largest = 0;
  for (const auto& layer : layers_) {
    int64_t bytes = 0;
    for (size_t k : layer)
      bytes += params_[k].second->to_local().numel() * params_[k].second->to_local().element_size();
    largest = std::max(largest, bytes);
  }
  return largest;
}

int64_t Zero::shared_bytes() const {
  std::map<size_t, int> uses;
  for (const auto& layer : layers_)
    for (size_t k : layer)
      ++uses[k];
  int64_t bytes = 0;
  for (const auto& [k, n] : uses) {
    const at::Tensor& local = params_[k].second->to_local();
    if (n > 1) bytes += local.numel() * local.element_size();
  }
  return bytes;
}

int64_t Zero::take_peak_gathered_bytes() {
  const int64_t peak = peak_gathered_bytes_;
  peak_gathered_bytes_ = gathered_bytes_;
  return peak;
}

}  // namespace vescale
