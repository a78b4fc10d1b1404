#include "dtensor/expert_ops.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <vector>

#include "core/error.h"
#include "dtensor/op_driver.h"

namespace vescale {
namespace {

/// attach_loss's node: the forward passes y on, the backward gives the loss its fixed gradient.
struct AttachedLoss : public torch::autograd::Function<AttachedLoss> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& y,
                            const at::Tensor& loss, double grad) {
    ctx->saved_data["grad"] = grad;
    ctx->saved_data["loss_like"] = at::empty({}, loss.options());
    return y;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const double grad = ctx->saved_data["grad"].toDouble();
    const at::Tensor like = ctx->saved_data["loss_like"].toTensor();
    return {grads.at(0), at::full_like(like, grad), at::Tensor()};
  }
};

/// The experts' SwiGLU on local pieces: rows grouped by expert (one host read of the counts), each
/// group through its expert's slice of the stacked weights, scaled by its routing weight and added
/// back at its rows.
at::Tensor moe_experts_local(const at::Tensor& x, const at::Tensor& probs, const at::Tensor& w1,
                             const at::Tensor& w3, const at::Tensor& w2, int64_t k) {
  const ExpertRoutes routes = route_top_k(probs, k);
  const int64_t n_experts = w1.size(0);
  const at::Tensor slot_expert = routes.experts.reshape({-1});  // slot s: row s / k
  const at::Tensor slot_weight = routes.weights.reshape({-1}).to(x.scalar_type());
  const at::Tensor by_expert =
      std::get<1>(at::sort(slot_expert, /*stable=*/true, /*dim=*/0, /*descending=*/false));
  const at::Tensor counts = at::bincount(slot_expert, {}, n_experts).to(at::kCPU);
  const auto* count = counts.data_ptr<int64_t>();
  at::Tensor out = at::zeros_like(x);
  int64_t first = 0;
  for (int64_t e = 0; e < n_experts; ++e) {
    if (count[e] == 0) continue;
    const at::Tensor slots = by_expert.narrow(0, first, count[e]);
    first += count[e];
    const at::Tensor rows = at::div(slots, k, "floor");
    const at::Tensor h = x.index_select(0, rows);
    const at::Tensor inner = at::silu(at::matmul(h, w1[e].t())) * at::matmul(h, w3[e].t());
    const at::Tensor y =
        at::matmul(inner, w2[e].t()) * slot_weight.index_select(0, slots).unsqueeze(1);
    out = out.index_add(0, rows, y);
  }
  return out;
}

}  // namespace

// NOTE [Expert routing]
// A token goes to the k experts of highest router probability. Among equal probabilities the
// lower expert index wins, on every device and layout: a stable descending sort keeps equal
// values in index order, where at::topk leaves their order unspecified (and a tie broken
// differently on two layouts would route a token to different experts). The chosen
// probabilities are renormalised to sum to 1 (Mixtral), in the router's dtype.
ExpertRoutes route_top_k(const at::Tensor& probs, int64_t k) {
  VS_CHECK(probs.dim() == 2 && k >= 1 && k <= probs.size(1),
           "[dtensor] route_top_k: {} experts per token of {}-D probabilities of {} experts", k,
           probs.dim(), probs.dim() == 2 ? probs.size(1) : 0);
  const at::Tensor order =
      std::get<1>(at::sort(probs.detach(), /*stable=*/true, /*dim=*/1, /*descending=*/true));
  ExpertRoutes routes;
  routes.experts = order.narrow(1, 0, k).contiguous();
  const at::Tensor chosen = probs.gather(1, routes.experts);
  routes.weights = chosen / chosen.sum(1, /*keepdim=*/true);
  return routes;
}

// NOTE [MoE auxiliary loss]
// The router's load-balancing loss (Switch Transformer, Mixtral): E x sum_e f_e P_e, where f_e
// is the share of the routed slots that went to expert e and P_e the mean router probability of
// e, minimal (1) when both are uniform. f_e is a count and carries no gradient; P_e does. It is
// taken per sequence and averaged over the sequences, like the loss: a batch-wise loss (f and P
// over all of a batch's tokens) is a product of two batch means, not a mean, so it is a
// different number when the batch is split over dp ranks or micro-batches, and no layout could
// reproduce the 1-process run. Per sequence, the mean over a micro-batch's sequences, averaged
// over micro-batches and dp ranks as the loss is, is the same number on every layout (a sequence
// split over cp ranks would need its counts and probabilities summed over the ring first).
// A model averages it over its MoE layers; the trainer adds aux_loss_coef times that to the
// objective through attach_loss on each layer's output, scaled as the schedule scales the loss.
at::Tensor moe_aux_loss(const at::Tensor& probs, const at::Tensor& experts) {
  VS_CHECK(probs.dim() == 3 && experts.dim() == 3 && probs.size(0) == experts.size(0) &&
               probs.size(1) == experts.size(1),
           "[dtensor] moe_aux_loss: probabilities [S, T, E] and their experts [S, T, k]");
  const int64_t sequences = probs.size(0), n_experts = probs.size(2);
  const int64_t slots = experts.size(1) * experts.size(2);
  const at::Tensor flat = experts.reshape({sequences, slots});
  const at::Tensor counts = at::zeros({sequences, n_experts}, probs.options())
                                .scatter_add_(1, flat, at::ones(flat.sizes(), probs.options()));
  const at::Tensor f = counts / static_cast<double>(slots);
  const at::Tensor p = probs.mean(1);
  return (f.detach() * p).sum(1).mean() * static_cast<double>(n_experts);
}

at::Tensor attach_loss(const at::Tensor& y, const at::Tensor& loss, double grad) {
  if (!torch::autograd::GradMode::is_enabled() || !loss.requires_grad()) return y;
  return AttachedLoss::apply(y, loss, grad);
}

namespace ops {

DTensor moe_experts(const DTensor& x, const DTensor& probs, const DTensor& w1, const DTensor& w3,
                    const DTensor& w2, int64_t k) {
  VS_CHECK(x.ndim() == 2 && probs.ndim() == 2 && w1.ndim() == 3 && w3.shape() == w1.shape() &&
               w2.ndim() == 3 && probs.size(0) == x.size(0) && probs.size(1) == w1.size(0) &&
               w2.size(0) == w1.size(0) && w1.size(2) == x.size(1) && w2.size(1) == x.size(1) &&
               w2.size(2) == w1.size(1),
           "[dtensor] moe_experts: x [N, C], probs [N, E], w1 and w3 [E, I, C], w2 [E, C, I]");
  return detail::run_op(
      {"moe_experts",
       {&x, &probs, &w1, &w3, &w2},
       [](int64_t) { return detail::moe_experts_rule(); },
       x.shape(),
       [k](const std::vector<at::Tensor>& l, const std::vector<const DTensorSpec*>&,
           const DTensorSpec&) { return moe_experts_local(l[0], l[1], l[2], l[3], l[4], k); }});
}

}  // namespace ops
}  // namespace vescale
