// The llama family: its [model] keys, and what the rest of the program asks of a Llama.
#include <fmt/format.h>

#include <cmath>

#include "core/error.h"
#include "family/bound_keys.h"
#include "family/hf_layout.h"
#include "models/families.h"
#include "models/llama.h"

namespace vescale::models {
const std::vector<BoundKey<LlamaConfig>>& llama_keys() {
  static const std::vector<BoundKey<LlamaConfig>> keys = {
      {{"vocab_size", int64_t{256}, "Llama vocabulary", at_least(1)}, &LlamaConfig::vocab_size},
      {{"block_size", int64_t{64}, "Llama longest sequence (max_position_embeddings)", at_least(1)},
       &LlamaConfig::block_size},
      {{"n_layer", int64_t{2}, "Llama decoder layers", at_least(1)}, &LlamaConfig::n_layer},
      {{"n_head", int64_t{4}, "Llama query heads", at_least(1)}, &LlamaConfig::n_head},
      {{"n_kv_head", int64_t{4}, "Llama key/value heads (grouped-query attention; divides n_head)",
        at_least(1)},
       &LlamaConfig::n_kv_head},
      {{"n_embd", int64_t{64}, "Llama hidden size (n_head x an even head size)", at_least(2)},
       &LlamaConfig::n_embd},
      {{"intermediate_size", int64_t{172}, "Llama SwiGLU MLP inner size", at_least(1)},
       &LlamaConfig::intermediate_size},
      {{"rope_theta", 10000.0, "Llama rotary embedding base", above(0)}, &LlamaConfig::rope_theta},
      {{"rms_norm_eps", 1e-5, "Llama RMSNorm epsilon", above(0)}, &LlamaConfig::rms_norm_eps},
      {{"tie_embeddings", false, "Llama lm_head shares model.embed_tokens.weight"},
       &LlamaConfig::tie_embeddings},
      {{"vocab_multiple", int64_t{64}, "Vocabulary padded to a multiple of this x tp",
        within(1, 1 << 20), KeyRole::kLayout},
       &LlamaConfig::vocab_multiple},
  };
  return keys;
}

void check_llama_shape(const LlamaConfig& l, const ModelSpec& spec) {
  VS_USER_CHECK(spec.seq_len <= l.block_size,
                "config {}: training.seq_len = {} is longer than model.block_size = {}",
                spec.source, spec.seq_len, l.block_size);
  VS_USER_CHECK(l.n_embd % l.n_head == 0 && (l.n_embd / l.n_head) % 2 == 0,
                "config {}: model.n_embd = {} must be model.n_head = {} x an even head size "
                "(rotary embeddings turn pairs of a head's dims)",
                spec.source, l.n_embd, l.n_head);
  VS_USER_CHECK(l.n_head % l.n_kv_head == 0,
                "config {}: model.n_kv_head = {} must divide model.n_head = {} (each key/value "
                "head serves a group of query heads)",
                spec.source, l.n_kv_head, l.n_head);
}

std::vector<HFTensor> llama_hf_tensors(const LlamaConfig& l, const LayerMlpTensors& mlp) {
  const int64_t c = l.n_embd, kv = l.n_kv_head * (l.n_embd / l.n_head);
  std::vector<HFTensor> t;
  t.push_back(
      vocab_rows("model.embed_tokens.weight", "model.embed_tokens.weight", l.vocab_size, c));
  for (int64_t i = 0; i < l.n_layer; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    t.push_back(same_tensor(p + "self_attn.q_proj.weight", {c, c}));
    t.push_back(same_tensor(p + "self_attn.k_proj.weight", {kv, c}));
    t.push_back(same_tensor(p + "self_attn.v_proj.weight", {kv, c}));
    t.push_back(same_tensor(p + "self_attn.o_proj.weight", {c, c}));
    mlp(t, p);
    t.push_back(same_tensor(p + "input_layernorm.weight", {c}));
    t.push_back(same_tensor(p + "post_attention_layernorm.weight", {c}));
  }
  t.push_back(same_tensor("model.norm.weight", {c}));
  if (!l.tie_embeddings)
    t.push_back(vocab_rows("lm_head.weight", "lm_head.weight", l.vocab_size, c));
  return t;
}

std::vector<std::pair<std::string, std::vector<std::string>>> llama_attention_lora_roles() {
  return {{"q", {"self_attn.q_proj"}},
          {"k", {"self_attn.k_proj"}},
          {"v", {"self_attn.v_proj"}},
          {"qkv", {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"}},
          {"o", {"self_attn.o_proj"}}};
}

std::vector<ParamRole> llama_param_roles(const std::string& fqn, bool tied) {
  if (fqn == "model.embed_tokens.weight")
    return tied ? std::vector{ParamRole::kEmbedding, ParamRole::kLmHead}
                : std::vector{ParamRole::kEmbedding};
  if (fqn == "lm_head.weight") return {ParamRole::kLmHead};
  if (ends_with(fqn, "norm.weight")) return {ParamRole::kNorm};
  return {ParamRole::kHidden};
}

namespace {

LlamaConfig llama_config(const ModelSpec& spec) {
  LlamaConfig l = read_keys(llama_keys(), spec.keys);
  l.fused_projections = spec.fused_projections;
  return l;
}

/// One decoder layer's parameters: q and o (C x C), k and v (C x kv), gate, up and down
/// (C x inner), two norms.
double layer_parameters(const LlamaConfig& l) {
  const double e = static_cast<double>(l.n_embd);
  const double kv = static_cast<double>(l.n_kv_head * (l.n_embd / l.n_head));
  const double inner = static_cast<double>(l.intermediate_size);
  return 2.0 * e * e + 2.0 * e * kv + 3.0 * e * inner + 2.0 * e;
}

class LlamaFamily : public ModelFamily {
 public:
  std::string name() const override { return "llama"; }

  std::vector<FamilyKey> keys() const override { return declared_keys(llama_keys()); }

  Objective objective() const override { return Objective::kNextToken; }
  int64_t activation_dims() const override { return 3; }

  void check(const ModelSpec& spec) const override { check_llama_shape(llama_config(spec), spec); }

  std::shared_ptr<Module> build(const ModelSpec& spec) const override {
    auto llama = std::make_shared<Llama>(llama_config(spec), spec.tp);
    if (spec.lora.on()) llama->add_adapters(spec, lora_roles());
    return llama;
  }

  std::vector<std::pair<std::string, std::vector<std::string>>> lora_roles() const override {
    auto roles = llama_attention_lora_roles();
    roles.insert(
        roles.end(),
        {{"up", {"mlp.up_proj"}}, {"gate", {"mlp.gate_proj"}}, {"down", {"mlp.down_proj"}}});
    return roles;
  }

  std::vector<Layer> layers(const ModelSpec& spec, Module& model) const override {
    // 6 FLOPs per parameter per token for the matmuls forward and backward, plus attention's
    // 12 C T per token and layer (scores and values, over every query head).
    const LlamaConfig l = llama_config(spec);
    const double t = static_cast<double>(spec.seq_len), c = static_cast<double>(l.n_embd);
    auto params = [&](const std::vector<std::string>& modules) {
      return static_cast<double>(parameters_under(model, modules));
    };
    std::vector<Layer> out;
    // The embedding is a lookup: no matmul FLOPs.
    out.push_back({"embedding", {"model.embed_tokens"}, 0.0, LayerKind::kEmbedding});
    for (int64_t i = 0; i < l.n_layer; ++i) {
      const std::string layer = "model.layers." + std::to_string(i);
      out.push_back(
          {layer, {layer}, t * (6.0 * params({layer}) + 12.0 * c * t), LayerKind::kBlock});
    }
    out.push_back({"head",
                   {"model.norm", "lm_head"},
                   6.0 * t * params({"model.norm", "lm_head"}),
                   LayerKind::kHead});
    return out;
  }

  double parameter_count(const ModelSpec& spec) const override {
    const LlamaConfig l = llama_config(spec);
    const double vocab = static_cast<double>(l.padded_vocab(spec.tp));
    const double e = static_cast<double>(l.n_embd);
    return vocab * e * (l.tie_embeddings ? 1.0 : 2.0) +
           static_cast<double>(l.n_layer) * layer_parameters(l) + e;
  }

  double output_elements_per_sample(const ModelSpec& spec) const override {
    return static_cast<double>(spec.seq_len) *
           (static_cast<double>(llama_config(spec).vocab_size) / static_cast<double>(spec.tp));
  }

  std::vector<std::string> size_keys() const override {
    return {"n_layer", "n_embd", "intermediate_size", "vocab_size", "block_size"};
  }

  int64_t vocab_size(const ModelSpec& spec) const override { return llama_config(spec).vocab_size; }

  /// The layers' attention and MLP projections are hidden (NOTE [Muon]).
  std::vector<ParamRole> param_roles(const ModelSpec& spec, const std::string& fqn) const override {
    return llama_param_roles(fqn, llama_config(spec).tie_embeddings);
  }
  std::optional<HFLayout> hf_layout(const ModelSpec& spec) const override {
    const LlamaConfig l = llama_config(spec);
    const int64_t c = l.n_embd;
    HFLayout out{"LlamaForCausalLM", {}, {}, {}};
    out.config = {{"architectures", {"LlamaForCausalLM"}},
                  {"model_type", "llama"},
                  {"vocab_size", l.vocab_size},
                  {"hidden_size", c},
                  {"intermediate_size", l.intermediate_size},
                  {"num_hidden_layers", l.n_layer},
                  {"num_attention_heads", l.n_head},
                  {"num_key_value_heads", l.n_kv_head},
                  {"head_dim", c / l.n_head},
                  {"max_position_embeddings", l.block_size},
                  {"rms_norm_eps", l.rms_norm_eps},
                  {"rope_theta", l.rope_theta},
                  {"rope_scaling", nullptr},
                  {"hidden_act", "silu"},
                  {"attention_bias", false},
                  {"mlp_bias", false},
                  {"initializer_range", 0.02},
                  {"tie_word_embeddings", l.tie_embeddings}};
    out.checked_keys = {{"model_type", ""},
                        {"vocab_size", "model.vocab_size"},
                        {"hidden_size", "model.n_embd"},
                        {"intermediate_size", "model.intermediate_size"},
                        {"num_hidden_layers", "model.n_layer"},
                        {"num_attention_heads", "model.n_head"},
                        {"num_key_value_heads", "model.n_kv_head"},
                        {"rms_norm_eps", "model.rms_norm_eps"},
                        {"rope_theta", "model.rope_theta"},
                        {"hidden_act", ""},
                        {"head_dim", ""},
                        {"rope_scaling", ""},
                        {"attention_bias", ""},
                        {"mlp_bias", ""},
                        {"tie_word_embeddings", "model.tie_embeddings"}};
    // transformers reads a null head_dim as hidden_size / num_attention_heads.
    out.also_accepted = {{"head_dim", nullptr}};
    out.ignored_suffixes = {".rotary_emb.inv_freq"};
    if (l.tie_embeddings) out.ignored_suffixes.push_back("lm_head.weight");
    out.tensors = llama_hf_tensors(l, [&l, c](std::vector<HFTensor>& t, const std::string& p) {
      t.push_back(same_tensor(p + "mlp.gate_proj.weight", {l.intermediate_size, c}));
      t.push_back(same_tensor(p + "mlp.up_proj.weight", {l.intermediate_size, c}));
      t.push_back(same_tensor(p + "mlp.down_proj.weight", {c, l.intermediate_size}));
    });
    return out;
  }

  std::optional<TransformerShape> transformer_shape(const ModelSpec& spec) const override {
    const LlamaConfig l = llama_config(spec);
    return TransformerShape{
        l.n_layer,          l.n_embd, l.n_head, l.vocab_size, "model.embed_tokens.weight",
        layer_parameters(l)};
  }
};

}  // namespace

std::shared_ptr<const ModelFamily> llama_family() {
  return std::make_shared<LlamaFamily>();
}

}  // namespace vescale::models
