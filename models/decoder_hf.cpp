// The decoder family's Hugging Face layout: config.json and the tensors of LlamaForCausalLM and
// MixtralForCausalLM, whose names are ours (NOTE [Hugging Face layout]).
#include <fmt/format.h>

#include "core/error.h"
#include "models/decoder_family.h"

namespace vescale::models {
namespace {

/// config.json: the keys every variant writes, its own, and its MLP kind's (but torch_dtype).
nlohmann::ordered_json hf_config(const DecoderVariant& v, const DecoderConfig& c) {
  nlohmann::ordered_json out = {{"architectures", {v.hf_architecture}},
                                {"model_type", v.hf_model_type},
                                {"vocab_size", c.vocab_size},
                                {"hidden_size", c.n_embd},
                                {"intermediate_size", c.intermediate_size},
                                {"num_hidden_layers", c.n_layer},
                                {"num_attention_heads", c.n_head},
                                {"num_key_value_heads", c.n_kv_head},
                                {"head_dim", c.n_embd / c.n_head},
                                {"max_position_embeddings", c.block_size},
                                {"rms_norm_eps", c.rms_norm_eps},
                                {"rope_theta", c.rope_theta},
                                {"rope_scaling", nullptr},
                                {"hidden_act", "silu"}};
  out.update(v.hf_checked);
  out.update(v.hf_written);
  if (c.mlp == DecoderMlp::kExperts) {
    out.update({{"num_local_experts", c.num_experts},
                {"num_experts_per_tok", c.experts_per_token},
                {"router_aux_loss_coef", c.router_aux_loss_coef},
                {"router_jitter_noise", 0.0},
                {"output_router_logits", false}});
  }
  out.update({{"initializer_range", 0.02}, {"tie_word_embeddings", c.tie_embeddings}});
  return out;
}

/// The config.json keys an import checks: ours they must equal ("model.n_layer"), or "" for
/// the value config.json is written with.
std::vector<std::pair<std::string, std::string>> checked_keys(const DecoderVariant& v,
                                                              const DecoderConfig& c) {
  std::vector<std::pair<std::string, std::string>> out = {
      {"model_type", ""},
      {"vocab_size", "model.vocab_size"},
      {"hidden_size", "model.n_embd"},
      {"intermediate_size", "model.intermediate_size"},
      {"num_hidden_layers", "model.n_layer"},
      {"num_attention_heads", "model.n_head"},
      {"num_key_value_heads", "model.n_kv_head"}};
  if (c.mlp == DecoderMlp::kExperts) {
    out.insert(out.end(), {{"num_local_experts", "model.num_experts"},
                           {"num_experts_per_tok", "model.experts_per_token"}});
  }
  out.insert(out.end(), {{"rms_norm_eps", "model.rms_norm_eps"},
                         {"rope_theta", "model.rope_theta"},
                         {"rope_scaling", ""},
                         {"hidden_act", ""},
                         {"head_dim", ""}});
  for (const auto& [key, value] : v.hf_checked.items())
    out.emplace_back(key, "");
  out.emplace_back("tie_word_embeddings", "model.tie_embeddings");
  return out;
}

/// One layer's MLP tensors under its prefix ("model.layers.3.").
void mlp_tensors(const DecoderConfig& c, const std::string& prefix, std::vector<HFTensor>& t) {
  const int64_t e = c.n_embd, inner = c.intermediate_size;
  if (c.mlp == DecoderMlp::kSwiGLU) {
    t.push_back(same_tensor(prefix + "mlp.gate_proj.weight", {inner, e}));
    t.push_back(same_tensor(prefix + "mlp.up_proj.weight", {inner, e}));
    t.push_back(same_tensor(prefix + "mlp.down_proj.weight", {e, inner}));
    return;
  }
  const std::string moe = prefix + "block_sparse_moe.";
  t.push_back(same_tensor(moe + "gate.weight", {c.num_experts, e}));
  for (int64_t j = 0; j < c.num_experts; ++j) {
    const std::string expert = fmt::format("{}experts.{}.", moe, j);
    t.push_back(same_tensor(expert + "w1.weight", {inner, e}));
    t.push_back(same_tensor(expert + "w2.weight", {e, inner}));
    t.push_back(same_tensor(expert + "w3.weight", {inner, e}));
  }
}

/// Hugging Face's tensors in the order they are written: the embedding, each layer's attention,
/// MLP and norms, the final norm and an untied lm_head.
std::vector<HFTensor> hf_tensors(const DecoderConfig& c) {
  const int64_t e = c.n_embd, kv = c.kv_width();
  std::vector<HFTensor> t;
  t.push_back(
      vocab_rows("model.embed_tokens.weight", "model.embed_tokens.weight", c.vocab_size, e));
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    t.push_back(same_tensor(p + "self_attn.q_proj.weight", {e, e}));
    t.push_back(same_tensor(p + "self_attn.k_proj.weight", {kv, e}));
    t.push_back(same_tensor(p + "self_attn.v_proj.weight", {kv, e}));
    t.push_back(same_tensor(p + "self_attn.o_proj.weight", {e, e}));
    mlp_tensors(c, p, t);
    t.push_back(same_tensor(p + "input_layernorm.weight", {e}));
    t.push_back(same_tensor(p + "post_attention_layernorm.weight", {e}));
  }
  t.push_back(same_tensor("model.norm.weight", {e}));
  if (!c.tie_embeddings)
    t.push_back(vocab_rows("lm_head.weight", "lm_head.weight", c.vocab_size, e));
  return t;
}

/// transformers stacks each layer's experts: w1 and w3 as gate_up_proj [E, 2I, C] (w1's rows
/// first), w2 as down_proj [E, C, I]; peft adapts those parameters (target_parameters).
void stack_experts(const DecoderConfig& c, HFLayout& out) {
  const int64_t inner = c.intermediate_size, e = c.num_experts;
  out.hf_defaults = {{"num_local_experts", 8}, {"num_experts_per_tok", 2}};
  out.stacked_order = {"gate_up_proj", "down_proj"};
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string ours = fmt::format("model.layers.{}.block_sparse_moe.experts.", i);
    const std::string theirs = fmt::format("model.layers.{}.mlp.experts.", i);
    for (int64_t j = 0; j < e; ++j) {
      const std::string expert = ours + std::to_string(j) + ".";
      out.linears[expert + "w1"] = {theirs + "gate_up_proj", 0, 2 * inner, j, e};
      out.linears[expert + "w3"] = {theirs + "gate_up_proj", inner, 2 * inner, j, e};
      out.linears[expert + "w2"] = {theirs + "down_proj", 0, c.n_embd, j, e};
    }
  }
}

}  // namespace

HFLayout decoder_hf_layout(const DecoderVariant& v, const DecoderConfig& c, const ModelSpec& spec) {
  VS_USER_CHECK(!c.shared_expert,
                "[hf] config {}: model.shared_expert = true has no Hugging Face counterpart "
                "({} has no shared expert); export or import a model without it",
                spec.source, v.hf_architecture);
  HFLayout out{v.hf_architecture, hf_config(v, c), hf_tensors(c), checked_keys(v, c)};
  // transformers reads a null head_dim as hidden_size / num_attention_heads.
  out.also_accepted = {{"head_dim", nullptr}};
  out.ignored_suffixes = {".rotary_emb.inv_freq"};
  if (c.tie_embeddings) out.ignored_suffixes.push_back("lm_head.weight");
  if (c.mlp == DecoderMlp::kExperts) stack_experts(c, out);
  return out;
}

}  // namespace vescale::models
