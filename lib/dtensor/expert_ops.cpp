#include "dtensor/expert_ops.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <array>
#include <vector>

#include "core/error.h"
#include "dtensor/expert_dispatch.h"
#include "dtensor/op_driver.h"
#include "kernels/kernel_table.h"

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

/// The experts' SwiGLU on local pieces: the routed slots ordered by expert, their rows through the
/// experts (here by the kernel table's path, NOTE [Grouped experts]; or on their ep ranks, which
/// needs the counts on the host for the all-to-alls' sizes), scaled by their routing weights and
/// added back at their rows. The counts are made on the device by a scatter-add (at::bincount
/// reads its input's max back to the host on CUDA).
at::Tensor moe_experts_local(const at::Tensor& x, const at::Tensor& probs,
                             const std::vector<ExpertWeights>& local, int64_t k,
                             const ExpertPlacement& placement) {
  const ExpertRoutes routes = route_top_k(probs, k);
  const at::Tensor slot_expert = routes.experts.reshape({-1});  // slot s: row s / k
  const at::Tensor slot_weight = routes.weights.reshape({-1}).to(x.scalar_type());
  const at::Tensor by_expert =
      std::get<1>(at::sort(slot_expert, /*stable=*/true, /*dim=*/0, /*descending=*/false));
  const at::Tensor counts = at::zeros({placement.total}, slot_expert.options())
                                .scatter_add_(0, slot_expert, at::ones_like(slot_expert));
  const at::Tensor rows = at::div(by_expert, k, "floor");
  const at::Tensor h = x.index_select(0, rows);
  at::Tensor y;
  if (placement.ranks() == 1) {
    y = kernels::run_experts(h, counts, local);
  } else {
    const at::Tensor on_host = counts.to(at::kCPU);
    const std::vector<int64_t> per_expert(on_host.data_ptr<int64_t>(),
                                          on_host.data_ptr<int64_t>() + placement.total);
    y = dispatch_to_experts(h, per_expert, local, placement);
  }
  return at::zeros_like(x).index_add(0, rows,
                                     y * slot_weight.index_select(0, by_expert).unsqueeze(1));
}

/// The experts' local weights among moe_experts' inputs `l` (after x and the probabilities):
/// w1, w3, w2 of each expert, then the A and B of each of its adapters that is on (`adapted`: on
/// w1, w3, w2), scaled by `scaling`.
std::vector<ExpertWeights> expert_weights(const std::vector<at::Tensor>& l,
                                          const std::array<bool, 3>& adapted, double scaling) {
  std::vector<ExpertWeights> out;
  size_t i = 2;
  while (i < l.size()) {
    ExpertWeights w{l[i], l[i + 1], l[i + 2]};
    i += 3;
    const std::array<ExpertAdapter*, 3> adapters{&w.lora1, &w.lora3, &w.lora2};
    for (size_t j = 0; j < 3; ++j) {
      if (!adapted[j]) continue;
      *adapters[j] = ExpertAdapter{l[i], l[i + 1], scaling};
      i += 2;
    }
    out.push_back(std::move(w));
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
// over micro-batches and dp ranks as the loss is, is the same number on every layout.
// Under context parallelism each of the cp ranks holds part of every sequence: the counts are
// summed over the ring first (f is the whole sequence's), and each rank takes cp x E x
// sum_e f_e P'_e with P'_e its own tokens' probabilities summed over the whole sequence's
// length. The mean over the ring (the data average the loss takes) is the sequence's loss, and
// each rank's probabilities get their own share of its gradient.
// A model averages it over its MoE layers; the trainer adds router_aux_loss_coef times that to
// the objective through attach_loss on each layer's output, scaled as the schedule scales the
// loss.
at::Tensor moe_aux_loss(const at::Tensor& probs, const at::Tensor& experts,
                        const comm::Group* ring) {
  VS_CHECK(probs.dim() == 3 && experts.dim() == 3 && probs.size(0) == experts.size(0) &&
               probs.size(1) == experts.size(1),
           "[dtensor] moe_aux_loss: probabilities [S, T, E] and their experts [S, T, k]");
  const int64_t sequences = probs.size(0), num_experts = probs.size(2);
  const int64_t parts = ring == nullptr ? 1 : ring->size();
  const int64_t tokens = probs.size(1) * parts;  // the whole sequence's
  const int64_t slots = tokens * experts.size(2);
  const at::Tensor flat = experts.reshape({sequences, -1});
  at::Tensor counts = at::zeros({sequences, num_experts}, probs.options())
                          .scatter_add_(1, flat, at::ones(flat.sizes(), probs.options()));
  if (parts > 1) ring->all_reduce(counts, comm::ReduceOp::kSum);
  const at::Tensor f = counts / static_cast<double>(slots);
  const at::Tensor p = probs.sum(1) / static_cast<double>(tokens);
  return (f.detach() * p).sum(1).mean() * static_cast<double>(num_experts * parts);
}

at::Tensor attach_loss(const at::Tensor& y, const at::Tensor& loss, double grad) {
  if (!torch::autograd::GradMode::is_enabled() || !loss.requires_grad()) return y;
  return AttachedLoss::apply(y, loss, grad);
}

namespace ops {

DTensor moe_experts(const DTensor& x, const DTensor& probs, const std::vector<ExpertParams>& local,
                    int64_t k, const ExpertPlacement& placement) {
  VS_CHECK(x.ndim() == 2 && probs.ndim() == 2 && probs.size(0) == x.size(0) &&
               probs.size(1) == placement.total &&
               static_cast<int64_t>(local.size()) == placement.count(),
           "[dtensor] moe_experts: x [N, C], probs [N, E] and the {} experts of this rank",
           placement.count());
  // Each expert's inputs: w1, w3, w2, then the factors of those of its adapters that are on.
  const auto adapters = [](const ExpertParams& e) {
    return std::array<const ExpertAdapterParams*, 3>{&e.lora1, &e.lora3, &e.lora2};
  };
  std::array<bool, 3> adapted{};
  std::vector<const DTensor*> inputs{&x, &probs};
  for (const ExpertParams& e : local) {
    const std::vector<int64_t> w2_shape{e.w1->size(1), e.w1->size(0)};
    VS_CHECK(e.w1->ndim() == 2 && e.w3->shape() == e.w1->shape() && e.w2->shape() == w2_shape &&
                 e.w1->size(1) == x.size(1),
             "[dtensor] moe_experts: w1 and w3 [I, C], w2 [C, I] for x [N, C]");
    inputs.insert(inputs.end(), {e.w1, e.w3, e.w2});
    for (size_t j = 0; j < 3; ++j) {
      const ExpertAdapterParams& lora = *adapters(e)[j];
      VS_CHECK((lora.a != nullptr) == (lora.b != nullptr) &&
                   (&e == &local.front() || adapted[j] == (lora.a != nullptr)),
               "[dtensor] moe_experts: a layer's experts are adapted alike, A with B");
      adapted[j] = lora.a != nullptr;
      if (lora.a != nullptr) inputs.insert(inputs.end(), {lora.a, lora.b});
    }
  }
  const auto n_inputs = static_cast<int64_t>(inputs.size());
  const double scaling = local.empty() ? 0.0 : local.front().lora_scaling;
  return detail::run_op(
      {"moe_experts", inputs, [n_inputs](int64_t) { return detail::moe_experts_rule(n_inputs); },
       x.shape(),
       [k, placement, adapted, scaling](const std::vector<at::Tensor>& l,
                                        const std::vector<const DTensorSpec*>&,
                                        const DTensorSpec&) {
         return moe_experts_local(l[0], l[1], expert_weights(l, adapted, scaling), k, placement);
       }});
}

}  // namespace ops
}  // namespace vescale
