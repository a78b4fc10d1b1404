#include "models/moe.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "core/error.h"
#include "dtensor/context_parallel.h"
#include "dtensor/expert_ops.h"
#include "dtensor/ops.h"
#include "models/layers.h"

namespace vescale::models {

RouterLog::RouterLog(int64_t layers, int64_t experts) : layers_(layers), experts_(experts) {}

void RouterLog::record(int64_t layer, const at::Tensor& aux_loss, const at::Tensor& load) {
  const auto step = static_cast<int64_t>(context_.step);
  if (step != step_) {
    entries_.clear();
    step_ = step;
  }
  entries_[{context_.row_offset, layer}] = {aux_loss.detach().to(at::kDouble), load};
}

RouterStats RouterLog::stats(int64_t step) const {
  RouterStats out;
  if (entries_.empty() || step != step_) {
    out.aux_loss = at::zeros({}, at::kDouble);
    out.load = at::zeros({layers_, experts_}, at::kLong);
    return out;
  }
  const at::TensorOptions options = entries_.begin()->second.first.options();
  out.aux_loss = at::zeros({}, options);
  out.load = at::zeros({layers_, experts_}, options.dtype(at::kLong));
  for (const auto& [key, entry] : entries_) {
    out.aux_loss += entry.first;
    out.load[key.second] += entry.second;
  }
  return out;
}

MixtralExpert::MixtralExpert(const DecoderConfig& c, ExpertSlot slot)
    : Module("MixtralBlockSparseTop2MLP") {
  register_module("w1", std::make_shared<Linear>(c.n_embd, c.intermediate_size, false));
  register_module("w2", std::make_shared<Linear>(c.intermediate_size, c.n_embd, false));
  register_module("w3", std::make_shared<Linear>(c.n_embd, c.intermediate_size, false));
  for (auto& [name, p] : named_parameters())
    p->expert = slot;
}

std::optional<ExpertParams> MixtralExpert::weights() {
  if (!named_parameters().front().second->materialized()) return std::nullopt;
  ExpertParams out{&child("w1").param("weight"), &child("w3").param("weight"),
                   &child("w2").param("weight")};
  const std::pair<const char*, ExpertAdapterParams*> adapters[] = {
      {"w1", &out.lora1}, {"w3", &out.lora3}, {"w2", &out.lora2}};
  for (const auto& [name, lora] : adapters) {
    auto& linear = static_cast<Linear&>(child(name));
    if (!linear.adapted()) continue;
    *lora = {&linear.param("lora_A.weight"), &linear.param("lora_B.weight")};
    out.lora_scaling = linear.adapter_scaling();
  }
  return out;
}

Tensors MixtralExpert::forward(const Tensors&) {
  throw Error("[model] mixtral: an expert runs inside its MoE layer (moe_experts), not on its own");
}

MixtralExperts::MixtralExperts(const DecoderConfig& c, std::shared_ptr<RouterLog> log)
    : Module("MixtralExperts"), top_k_(c.experts_per_token), log_(std::move(log)) {
  for (int64_t e = 0; e < c.num_experts; ++e) {
    experts_.push_back(register_module(
        std::to_string(e), std::make_shared<MixtralExpert>(c, ExpertSlot{e, c.num_experts})));
  }
}

Tensors MixtralExperts::forward(const Tensors& inputs) {
  const ExpertPlacement placement{static_cast<int64_t>(experts_.size()), log_->context().ep};
  std::vector<ExpertParams> local;
  for (size_t e = 0; e < experts_.size(); ++e) {
    const std::optional<ExpertParams> w = experts_[e]->weights();
    const auto index = static_cast<int64_t>(e);
    const bool mine = index >= placement.first() && index < placement.first() + placement.count();
    VS_CHECK(w.has_value() == mine,
             "[model] mixtral: expert {} is {}held on this rank, which holds experts {} to {} of "
             "{} (parallel.ep = {})",
             e, w ? "" : "not ", placement.first(), placement.first() + placement.count() - 1,
             placement.total, placement.ranks());
    if (w) local.push_back(*w);
  }
  return {ops::moe_experts(inputs.at(0), inputs.at(1), local, top_k_, placement)};
}

MixtralSparseMoe::MixtralSparseMoe(const DecoderConfig& c, int64_t layer,
                                   std::shared_ptr<RouterLog> log)
    : Module("MixtralSparseMoe"),
      layer_(layer),
      n_layer_(c.n_layer),
      top_k_(c.experts_per_token),
      router_aux_loss_coef_(c.router_aux_loss_coef),
      log_(std::move(log)) {
  gate_ = register_module("gate", std::make_shared<Linear>(c.n_embd, c.num_experts, false));
  experts_ = register_module("experts", std::make_shared<MixtralExperts>(c, log_));
  if (c.shared_expert) shared_ = register_module("shared_expert", std::make_shared<SwiGLU>(c));
}

Tensors MixtralSparseMoe::forward(const Tensors& inputs) {
  const DTensor& x = inputs.at(0);
  const int64_t b = x.size(0), t = x.size(1), c = x.size(2);
  const DTensor rows = ops::reshape(x, {b * t, c});
  // The router in float32 (float64 models: float64), as Hugging Face's Mixtral: the softmax over
  // experts and the top-k choice are not left to bf16 rounding.
  DTensor logits = (*gate_)(rows);
  if (logits.dtype() != at::kDouble && logits.dtype() != at::kFloat)
    logits = ops::to_dtype(logits, at::kFloat);
  const DTensor probs = ops::softmax(logits, -1);
  DTensor y = (*experts_)(Tensors{rows, probs}).at(0);
  if (shared_) y = ops::add(y, (*shared_)(rows));

  for (const Placement& p : probs.placements()) {
    VS_USER_CHECK(p.is_replicate(),
                  "[model] mixtral: layer {}'s router probabilities are {}: the auxiliary loss "
                  "needs every token's (a plan may not shard the MoE layers yet)",
                  layer_, probs.str());
  }
  const int64_t num_experts = probs.size(1);
  const at::Tensor local = probs.to_local().reshape({b, t, num_experts});
  const at::Tensor experts =
      route_top_k(probs.to_local().detach(), top_k_).experts.reshape({b, t, top_k_});
  const at::Tensor aux = moe_aux_loss(local, experts, ContextParallelScope::ring());
  const ForwardContext& context = log_->context();
  if (context.training && torch::autograd::GradMode::is_enabled()) {
    log_->record(layer_, aux, at::bincount(experts.reshape({-1}), {}, num_experts));
    // The objective's router_aux_loss_coef x (the mean over layers), scaled as the loss is.
    const double grad = router_aux_loss_coef_ * context.loss_scale / static_cast<double>(n_layer_);
    if (grad != 0.0) y = DTensor(attach_loss(y.to_local(), aux, grad), y.spec());
  }
  return {ops::reshape(y, {b, t, c})};
}

}  // namespace vescale::models
