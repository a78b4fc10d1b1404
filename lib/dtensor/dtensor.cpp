#include "dtensor/dtensor.h"

#include <ATen/ATen.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "dtensor/redistribute.h"
#include "dtensor/transitions.h"

namespace vescale {

DTensor::DTensor(at::Tensor local, DTensorSpec spec)
    : local_(std::move(local)), spec_(std::move(spec)) {
  VS_CHECK(local_.sizes().vec() == spec_.local_shape(),
           "[dtensor] local shape [{}] does not match {} (expected [{}])",
           fmt::join(local_.sizes(), ", "), spec_.str(), fmt::join(spec_.local_shape(), ", "));
}

int64_t DTensor::size(int64_t dim) const {
  const int64_t d = dim < 0 ? dim + ndim() : dim;
  VS_CHECK(d >= 0 && d < ndim(), "[dtensor] dim {} out of range for {}", dim, str());
  return spec_.shape[d];
}

DTensor DTensor::redistribute(const Placements& placements) const {
  at::Tensor local = redistribute_local(
      detail::local_for_use(*this, std::vector<bool>(mesh().ndim(), false)), spec_, placements);
  return DTensor(std::move(local), spec_.with_placements(placements));
}

at::Tensor DTensor::full_tensor() const {
  return redistribute(Placements(mesh().ndim(), Placement::replicate())).to_local();
}

DTensor& DTensor::requires_grad_(bool enabled) {
  local_.requires_grad_(enabled);
  param_ = enabled ? std::make_shared<detail::ParamState>() : nullptr;
  return *this;
}

DTensor DTensor::with_local(at::Tensor local) const {
  VS_CHECK(local.sizes() == local_.sizes(),
           "[dtensor] with_local: local shape [{}] for {} (expected [{}])",
           fmt::join(local.sizes(), ", "), str(), fmt::join(local_.sizes(), ", "));
  DTensor out = *this;
  out.local_ = std::move(local);
  return out;
}

std::vector<int> DTensor::partial_grad_dims() const {
  return param_ ? param_->partial_dims : std::vector<int>{};
}

void DTensor::mark_grad_reduced() {
  if (param_) param_->partial_dims.clear();
}

void DTensor::zero_grad() {
  at::Tensor& g = local_.mutable_grad();
  if (g.defined()) g = at::Tensor();
  if (param_) param_->partial_dims.clear();
}

detail::ParamState* detail::param_state(const DTensor& x) {
  return x.param_.get();
}

DTensor DTensor::grad() const {
  Placements grad_placements = spec_.placements;
  for (auto& p : grad_placements) {
    if (p.is_partial()) p = Placement::replicate();
  }
  for (int i : partial_grad_dims())
    grad_placements[i] = Placement::partial();
  const at::Tensor& g = local_.grad();
  VS_CHECK(g.defined(), "[dtensor] no gradient yet for {}", str());
  return DTensor(g, spec_.with_placements(grad_placements));
}

DTensor DTensor::from_local(at::Tensor local, const DeviceMesh& mesh, Placements placements,
                            std::optional<std::vector<int64_t>> shape) {
  if (shape) return DTensor(std::move(local), DTensorSpec(mesh, std::move(placements), *shape));
  // Global extents: undo the sharding inner mesh dim first, summing the pieces of each group.
  std::vector<int64_t> global = local.sizes().vec();
  for (auto& p : placements)
    p = p.normalized(local.dim());
  for (int i = mesh.ndim() - 1; i >= 0; --i) {
    if (!placements[i].is_shard()) continue;
    const int64_t d = placements[i].dim;
    at::Tensor extent = at::full({1}, global[d], at::dtype(at::kLong).device(mesh.device()));
    mesh.group(i).all_reduce(extent, comm::ReduceOp::kSum);
    global[d] = extent.item<int64_t>();
  }
  return DTensor(std::move(local), DTensorSpec(mesh, std::move(placements), global));
}

namespace detail {

at::Tensor local_for_use(const DTensor& x, const std::vector<bool>& sharded_use) {
  at::Tensor local = x.to_local();
  for (int i : x.grad_reduced_upstream()) {
    if (!sharded_use[i]) local = scale_grad(local, 1.0 / x.mesh().size(i));
  }
  return local;
}

}  // namespace detail

DTensor redistribute_for_consumers(const DTensor& x, const Placements& target) {
  const DeviceMesh& mesh = x.mesh();
  const int ndim = mesh.ndim();
  VS_CHECK(static_cast<int>(target.size()) == ndim, "[dtensor] {} placements for a {}-D mesh",
           target.size(), ndim);
  // First every dim that does not end Replicate, the ordinary way.
  Placements staged = x.placements();
  for (int i = 0; i < ndim; ++i) {
    if (!target[i].is_replicate()) staged[i] = target[i];
  }
  DTensor y = x.placements() == staged ? x : x.redistribute(staged);
  at::Tensor local = y.to_local();
  DTensorSpec spec = y.spec();
  std::vector<int> reduced;
  // Then the Replicate dims, inner first, each reducing the gradient that comes back.
  for (int i = ndim - 1; i >= 0; --i) {
    if (!target[i].is_replicate()) continue;
    const Placement p = spec.placements[i];
    const comm::Group& group = mesh.group(i);
    if (p.is_shard()) {
      for (int j = i + 1; j < ndim; ++j) {
        VS_CHECK(!spec.placements[j].is_shard(p.dim),
                 "[dtensor] cannot gather {} on mesh dim {} under {}", p.str(), i, spec.str());
      }
      local =
          detail::gather_shards_reduce_grad(local, group, p.dim, spec.group_piece_sizes(i, p.dim));
    } else {
      if (p.is_partial()) local = detail::reduce_partial(local, group, p.reduce);
      local = detail::sum_grad_over(local, group);
    }
    Placements next = spec.placements;
    next[i] = Placement::replicate();
    spec = spec.with_placements(next);
    reduced.push_back(i);
  }
  DTensor out(local, spec);
  out.reduced_upstream_ = reduced;
  return out;
}

DTensor distribute_tensor(const at::Tensor& full, const DeviceMesh& mesh,
                          const Placements& placements) {
  const DTensorSpec replicated(mesh, Placements(mesh.ndim(), Placement::replicate()),
                               full.sizes().vec());
  return DTensor(full, replicated).redistribute(placements);
}

}  // namespace vescale
