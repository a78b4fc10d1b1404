// DTensor: one logical tensor spread over a device mesh — a local tensor plus its DTensorSpec —
// with the values and gradients of the single-device tensor.
//
// NOTE [Gradient placements]
// The gradient of a DTensor's local tensor has the DTensor's placements, with two refinements:
// the local gradient of a Partial tensor is the loss's derivative with respect to that piece
// (for P(sum) the full, Replicate gradient of the reduced value; for P(avg) that over n; for
// P(max) it goes to the pieces holding the maximum), and a Replicate *parameter* used with
// sharded activations may hold a Partial gradient that the caller reduces (grad sync). Every
// collective's backward is its adjoint under this rule (S->R gathers forward and slices backward;
// R->S slices forward and gathers backward, so a Replicate gradient stays Replicate), and every op
// inserts the all-reduce its rule needs.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <optional>
#include <vector>

#include "dtensor/dtensor_spec.h"

namespace vescale {

class DTensor;

namespace detail {
/// Which mesh dims ops used a parameter on with sharded (partial) or replicated (full) gradient
/// contributions; the two must not mix on one dim. Kept by dtensor/'s op driver.
struct ParamState {
  std::vector<int> partial_dims;
  std::vector<int> full_dims;
};
/// The parameter record of `x` (null if `x` is not a parameter).
ParamState* param_state(const DTensor& x);
}  // namespace detail

class DTensor {
 public:
  DTensor(at::Tensor local, DTensorSpec spec);

  /// This rank's piece (with autograd history).
  const at::Tensor& to_local() const { return local_; }
  const DTensorSpec& spec() const { return spec_; }
  const DeviceMesh& mesh() const { return spec_.mesh; }
  const Placements& placements() const { return spec_.placements; }
  /// Global shape.
  const std::vector<int64_t>& shape() const { return spec_.shape; }
  int64_t size(int64_t dim) const;
  int64_t ndim() const { return spec_.ndim(); }
  at::ScalarType dtype() const { return local_.scalar_type(); }

  /// Moves to other placements on the same mesh, differentiably, in a low-volume order.
  /// *Collective* over the mesh.
  DTensor redistribute(const Placements& placements) const;
  /// The whole tensor on every rank (redistributes to all Replicate). *Collective.* Differentiable.
  at::Tensor full_tensor() const;

  /// Makes the local tensor a leaf that requires grad: a parameter. Ops leave a parameter's
  /// gradient Partial over mesh dims where it is Replicate but meets sharded activations
  /// (e.g. LayerNorm weights under sequence parallel): see partial_grad_dims().
  DTensor& requires_grad_(bool enabled = true);
  bool requires_grad() const { return local_.requires_grad(); }
  /// The gradient as a DTensor (NOTE [Gradient placements]), Partial over partial_grad_dims().
  /// Throws if backward has not produced one.
  DTensor grad() const;
  /// Mesh dims over which this parameter's local gradient is still a partial sum (known once
  /// the forward has run). Grad sync (parallel/grad_sync.h) reduces over them.
  std::vector<int> partial_grad_dims() const;
  /// Says the local gradient now holds the reduced (full) sum: it has the parameter's placements.
  void mark_grad_reduced();
  /// Drops the local gradient and what the last forward recorded about it.
  void zero_grad();

  /// Builds a DTensor from each rank's piece. Without `shape`, ranks exchange their extents along
  /// sharded dims (uneven pieces allowed) — *collective*; with it, the local shape is checked.
  static DTensor from_local(at::Tensor local, const DeviceMesh& mesh, Placements placements,
                            std::optional<std::vector<int64_t>> shape = std::nullopt);

  std::string str() const { return spec_.str(); }

  /// The same tensor (spec, parameter record, gradient reduction upstream) over another local
  /// tensor of the same shape: e.g. a leaf alias of the local tensor, for a recompute
  /// (NOTE [Recompute]).
  DTensor with_local(at::Tensor local) const;

  /// NOTE [Deferred gradient reduction]: mesh dims on which this tensor's producer
  /// (redistribute_for_consumers) reduces the gradients its consumers send back, so consumers in
  /// sharded computation leave theirs partial (and those in replicated computation scale theirs
  /// by 1/n): one reduction for all consumers, as Megatron's f operator.
  const std::vector<int>& grad_reduced_upstream() const { return reduced_upstream_; }

 private:
  at::Tensor local_;
  DTensorSpec spec_;
  std::shared_ptr<detail::ParamState> param_;  // shared by copies; set for parameters
  std::vector<int> reduced_upstream_;

  friend DTensor redistribute_for_consumers(const DTensor& x, const Placements& target);
  friend detail::ParamState* detail::param_state(const DTensor& x);
};

/// Like redistribute, but on the mesh dims where `target` is Replicate the gradient coming back
/// is taken as a partial sum and reduced here once (an all-reduce, or a reduce-scatter where `x`
/// was sharded): NOTE [Deferred gradient reduction]. What plans' `.input` Replicate hooks use.
/// *Collective.*
DTensor redistribute_for_consumers(const DTensor& x, const Placements& target);

namespace detail {
/// The local tensor of an input as an op may use it: gradient contributions scaled to the
/// partial form on the dims where its producer reduces them (for a use that is not a sharded
/// one on that dim). `sharded_use[i]`: the op uses it as Replicate in sharded computation.
at::Tensor local_for_use(const DTensor& x, const std::vector<bool>& sharded_use);
}  // namespace detail

/// Spreads `full` (the same on every rank) over the mesh: each rank keeps its piece. Partial
/// placements keep the value on coordinate 0 for sum (zeros elsewhere) and everywhere for avg
/// and max. Differentiable: the gradient of `full` is Replicate. Makes no communication.
DTensor distribute_tensor(const at::Tensor& full, const DeviceMesh& mesh,
                          const Placements& placements);

}  // namespace vescale
