#include "models/mixtral.h"

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

MixtralExperts::MixtralExperts(const MixtralConfig& c)
    : Module("MixtralExperts"), top_k_(c.experts_per_token) {
  register_parameter("w1", {c.n_experts, c.intermediate_size, c.n_embd}, ParamInit::normal(0.02));
  register_parameter("w3", {c.n_experts, c.intermediate_size, c.n_embd}, ParamInit::normal(0.02));
  register_parameter("w2", {c.n_experts, c.n_embd, c.intermediate_size}, ParamInit::normal(0.02));
}

Tensors MixtralExperts::forward(const Tensors& inputs) {
  return {
      ops::moe_experts(inputs.at(0), inputs.at(1), param("w1"), param("w3"), param("w2"), top_k_)};
}

MixtralSparseMoe::MixtralSparseMoe(const MixtralConfig& c, int64_t layer,
                                   std::shared_ptr<RouterLog> log)
    : Module("MixtralSparseMoe"),
      layer_(layer),
      n_layer_(c.n_layer),
      top_k_(c.experts_per_token),
      aux_loss_coef_(c.aux_loss_coef),
      log_(std::move(log)) {
  gate_ = register_module("gate", std::make_shared<Linear>(c.n_embd, c.n_experts, false));
  experts_ = register_module("experts", std::make_shared<MixtralExperts>(c));
  if (c.shared_expert) shared_ = register_module("shared_expert", std::make_shared<LlamaMLP>(c));
}

Tensors MixtralSparseMoe::forward(const Tensors& inputs) {
  const DTensor& x = inputs.at(0);
  const int64_t b = x.size(0), t = x.size(1), c = x.size(2);
  VS_USER_CHECK(ContextParallelScope::ring() == nullptr,
                "[model] mixtral: parallel.cp > 1 is not supported yet (a sequence's auxiliary "
                "loss needs the router's choices over all of its tokens)");
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
  const int64_t n_experts = probs.size(1);
  const at::Tensor local = probs.to_local().reshape({b, t, n_experts});
  const at::Tensor experts =
      route_top_k(probs.to_local().detach(), top_k_).experts.reshape({b, t, top_k_});
  const at::Tensor aux = moe_aux_loss(local, experts);
  const ForwardContext& context = log_->context();
  if (context.training && torch::autograd::GradMode::is_enabled()) {
    log_->record(layer_, aux, at::bincount(experts.reshape({-1}), {}, n_experts));
    // The objective's aux_loss_coef x (the mean over layers), scaled as the loss is.
    const double grad = aux_loss_coef_ * context.loss_scale / static_cast<double>(n_layer_);
    if (grad != 0.0) y = DTensor(attach_loss(y.to_local(), aux, grad), y.spec());
  }
  return {ops::reshape(y, {b, t, c})};
}

namespace {

const MixtralConfig& checked_experts(const MixtralConfig& c) {
  VS_USER_CHECK(c.experts_per_token >= 1 && c.experts_per_token <= c.n_experts,
                "[model] mixtral: experts_per_token {} must be between 1 and n_experts {}",
                c.experts_per_token, c.n_experts);
  return c;
}

}  // namespace

Mixtral::Mixtral(const MixtralConfig& c, int64_t tp)
    : Mixtral(checked_experts(c), tp, std::make_shared<RouterLog>(c.n_layer, c.n_experts)) {}

Mixtral::Mixtral(const MixtralConfig& c, int64_t tp, std::shared_ptr<RouterLog> log)
    : Llama("Mixtral", c, tp,
            [&c, &log](int64_t i) -> std::shared_ptr<Module> {
              // Llama's decoder layer around the mixture of experts, under Hugging Face's name.
              return std::make_shared<LlamaDecoderLayer>(
                  c, "MixtralDecoderLayer", "block_sparse_moe",
                  std::make_shared<MixtralSparseMoe>(c, i, log));
            }),
      config_(c),
      log_(std::move(log)) {}

Tensors Mixtral::run_layers(int64_t first, int64_t end, const Tensors& inputs,
                            const ForwardContext& context) {
  log_->set_context(context);
  return Llama::run_layers(first, end, inputs, context);
}

}  // namespace vescale::models
