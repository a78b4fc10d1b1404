#include "models/decoder.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <string>

#include "core/error.h"
#include "dtensor/ops.h"
#include "models/layers.h"
#include "models/moe.h"

namespace vescale::models {

int64_t DecoderConfig::padded_vocab(int64_t tp) const {
  return models::padded_vocab(vocab_size, vocab_multiple, tp);
}

RMSNorm::RMSNorm(int64_t dim, double eps) : Module("RMSNorm"), eps_(eps) {
  register_parameter("weight", {dim}, ParamInit::ones());
}

Tensors RMSNorm::forward(const Tensors& inputs) {
  return {ops::rms_norm(inputs.at(0), param("weight"), eps_)};
}

std::pair<DTensor, DTensor> RMSNorm::after_add(const DTensor& x, const DTensor& delta) {
  return ops::add_rms_norm(x, delta, param("weight"), eps_);
}

DecoderAttention::DecoderAttention(const DecoderConfig& c)
    : Module("LlamaAttention"),
      n_head_(c.n_head),
      n_kv_head_(c.n_kv_head),
      head_dim_(c.n_embd / c.n_head),
      rope_theta_(c.rope_theta),
      fused_projections_(c.fused_projections) {
  q_ = register_module("q_proj", std::make_shared<Linear>(c.n_embd, c.n_embd, false));
  k_ = register_module("k_proj", std::make_shared<Linear>(c.n_embd, c.kv_width(), false));
  v_ = register_module("v_proj", std::make_shared<Linear>(c.n_embd, c.kv_width(), false));
  o_ = register_module("o_proj", std::make_shared<Linear>(c.n_embd, c.n_embd, false));
}

Tensors DecoderAttention::forward(const Tensors& inputs) {
  const DTensor& x = inputs.at(0);
  const int64_t b = x.size(0), t = x.size(1), c = x.size(2);
  const std::vector<DTensor> qkv = project(x, {q_.get(), k_.get(), v_.get()}, fused_projections_);
  auto heads = [&](const DTensor& p, int64_t n) {
    return ops::transpose(ops::reshape(p, {b, t, n, head_dim_}), 1, 2);  // [B, n, T, D]
  };
  const DTensor q = ops::rotary(heads(qkv[0], n_head_), rope_theta_);
  const DTensor k = ops::rotary(heads(qkv[1], n_kv_head_), rope_theta_);
  const int64_t group = n_head_ / n_kv_head_;
  DTensor y = ops::causal_attention(q, ops::repeat_heads(k, group),
                                    ops::repeat_heads(heads(qkv[2], n_kv_head_), group));
  y = ops::reshape(ops::transpose(y, 1, 2), {b, t, c});
  return {(*o_)(y)};
}

SwiGLU::SwiGLU(const DecoderConfig& c)
    : Module("LlamaMLP"), fused_projections_(c.fused_projections) {
  gate_ =
      register_module("gate_proj", std::make_shared<Linear>(c.n_embd, c.intermediate_size, false));
  up_ = register_module("up_proj", std::make_shared<Linear>(c.n_embd, c.intermediate_size, false));
  down_ =
      register_module("down_proj", std::make_shared<Linear>(c.intermediate_size, c.n_embd, false));
}

Tensors SwiGLU::forward(const Tensors& inputs) {
  const std::vector<DTensor> gate_up =
      project(inputs.at(0), {gate_.get(), up_.get()}, fused_projections_);
  return {(*down_)(ops::swiglu(gate_up[0], gate_up[1]))};
}

DecoderLayer::DecoderLayer(const DecoderConfig& c, const std::string& type,
                           const std::string& mlp_name, std::shared_ptr<Module> mlp)
    : Module(type) {
  attn_ = register_module("self_attn", std::make_shared<DecoderAttention>(c));
  mlp_ = register_module(mlp_name, std::move(mlp));
  input_norm_ =
      register_module("input_layernorm", std::make_shared<RMSNorm>(c.n_embd, c.rms_norm_eps));
  post_norm_ = register_module("post_attention_layernorm",
                               std::make_shared<RMSNorm>(c.n_embd, c.rms_norm_eps));
}

Tensors DecoderLayer::forward(const Tensors& inputs) {
  const auto [x, normed] =
      add_then_norm(*post_norm_, inputs.at(0), (*attn_)((*input_norm_)(inputs.at(0))));
  return {ops::add(x, (*mlp_)(normed))};
}

namespace {

/// The shape checks the model makes itself (the family's check says the same naming the job's
/// config file), `name` the variant's ("llama").
void check_shape(const DecoderConfig& c, const std::string& name) {
  if (c.mlp == DecoderMlp::kExperts) {
    VS_USER_CHECK(c.experts_per_token >= 1 && c.experts_per_token <= c.num_experts,
                  "[model] {}: experts_per_token {} must be between 1 and num_experts {}", name,
                  c.experts_per_token, c.num_experts);
  }
  VS_USER_CHECK(c.vocab_size > 0 && c.block_size > 0 && c.n_layer > 0,
                "[model] {} needs positive vocab_size, block_size and n_layer", name);
  VS_USER_CHECK(c.n_head > 0 && c.n_embd % c.n_head == 0 && (c.n_embd / c.n_head) % 2 == 0,
                "[model] {}: n_embd {} must be n_head {} x an even head size (rotary turns "
                "pairs)",
                name, c.n_embd, c.n_head);
  VS_USER_CHECK(c.n_kv_head > 0 && c.n_head % c.n_kv_head == 0,
                "[model] {}: n_kv_head {} must divide n_head {}", name, c.n_kv_head, c.n_head);
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), ::tolower);
  return text;
}

}  // namespace

Decoder::Decoder(const DecoderConfig& c, const DecoderTypes& types, int64_t tp)
    : DecoderLM(types.model, c.vocab_size, c.block_size, c.n_layer, c.padded_vocab(tp)),
      config_(c) {
  check_shape(c, lower(types.model));
  if (c.mlp == DecoderMlp::kExperts)
    router_log_ = std::make_shared<RouterLog>(c.n_layer, c.num_experts);
  auto model = std::make_shared<Container>();
  register_module("model", model);
  embed_ = model->add("embed_tokens", std::make_shared<Embedding>(padded_vocab(), c.n_embd));
  auto layers = model->add("layers", std::make_shared<Container>());
  for (int64_t i = 0; i < c.n_layer; ++i)
    blocks_.push_back(layers->add(std::to_string(i), layer(i, types.layer)));
  final_norm_ = model->add("norm", std::make_shared<RMSNorm>(c.n_embd, c.rms_norm_eps));
  if (c.tie_embeddings) {
    lm_head_ = register_module(
        "lm_head", std::make_shared<TiedLinear>(embed_->all_parameter_names().at(0).second));
  } else {
    lm_head_ =
        register_module("lm_head", std::make_shared<Linear>(c.n_embd, padded_vocab(), false));
  }
  assign_names();
}

std::shared_ptr<Module> Decoder::layer(int64_t i, const std::string& type) {
  if (config_.mlp == DecoderMlp::kSwiGLU)
    return std::make_shared<DecoderLayer>(config_, type, "mlp", std::make_shared<SwiGLU>(config_));
  return std::make_shared<DecoderLayer>(
      config_, type, "block_sparse_moe",
      std::make_shared<MixtralSparseMoe>(config_, i, router_log_));
}

Tensors Decoder::run_layers(int64_t first, int64_t end, const Tensors& inputs,
                            const ForwardContext& context) {
  if (router_log_) router_log_->set_context(context);
  return DecoderLM::run_layers(first, end, inputs, context);
}

std::optional<RouterStats> Decoder::router_stats(int64_t step) const {
  if (!router_log_) return std::nullopt;
  return router_log_->stats(step);
}

}  // namespace vescale::models
