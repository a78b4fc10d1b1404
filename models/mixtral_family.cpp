// The mixtral family: its [model] keys, and what the rest of the program asks of a Mixtral.
#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "family/bound_keys.h"
#include "family/hf_layout.h"
#include "models/families.h"
#include "models/mixtral.h"

namespace vescale::models {
namespace {

/// Llama's keys, the mixture's after intermediate_size (each expert's inner size).
const std::vector<BoundKey<MixtralConfig>>& mixtral_keys() {
  using C = MixtralConfig;
  static const std::vector<BoundKey<C>> keys = [] {
    std::vector<BoundKey<C>> out = rebound<C>(llama_keys());
    const std::vector<BoundKey<C>> moe = {
        {{"num_experts", int64_t{4}, "Mixtral experts per layer (num_local_experts)",
          within(1, 1 << 16)},
         &C::num_experts},
        {{"experts_per_token", int64_t{2},
          "Mixtral experts each token goes to (top-k of the float32 router, weights "
          "renormalised; ties to the lower expert index; no token dropped)",
          within(1, 1 << 16)},
         &C::experts_per_token},
        {{"router_aux_loss_coef", 0.02,
          "Weight of the router's load-balancing loss in the objective (per sequence, mean over "
          "layers; 0: reported, not trained)",
          within(0, 1e3), KeyRole::kTraining},
         &C::router_aux_loss_coef},
        {{"shared_expert", false,
          "Mixtral: one more SwiGLU expert of intermediate_size that every token goes through, "
          "unweighted (DeepSeek's shared expert)"},
         &C::shared_expert},
    };
    const auto at = std::find_if(out.begin(), out.end(), [](const BoundKey<C>& k) {
      return k.key.name == "intermediate_size";
    });
    out.insert(at + 1, moe.begin(), moe.end());
    return out;
  }();
  return keys;
}

MixtralConfig mixtral_config(const ModelSpec& spec) {
  MixtralConfig m = read_keys(mixtral_keys(), spec.keys);
  m.fused_projections = spec.fused_projections;
  return m;
}

/// One layer's attention (q and o C x C, k and v C x kv) and norms.
double mixtral_attention_parameters(const MixtralConfig& m) {
  const double e = static_cast<double>(m.n_embd);
  const double kv = static_cast<double>(m.n_kv_head * (m.n_embd / m.n_head));
  return 2.0 * e * e + 2.0 * e * kv + 2.0 * e;
}

/// One layer's parameters of `experts` SwiGLU experts: w1, w3 [I, C] and w2 [C, I] each.
double mixtral_expert_parameters(const MixtralConfig& m, double experts) {
  return experts * 3.0 * static_cast<double>(m.n_embd) * static_cast<double>(m.intermediate_size);
}

/// One layer's parameters that `experts` experts (and the router and shared expert) hold.
double mixtral_moe_parameters(const MixtralConfig& m, int64_t experts) {
  const double routed = static_cast<double>(experts) + (m.shared_expert ? 1.0 : 0.0);
  return static_cast<double>(m.n_embd) * static_cast<double>(m.num_experts) +
         mixtral_expert_parameters(m, routed);
}

double mixtral_layer_parameters(const MixtralConfig& m) {
  return mixtral_attention_parameters(m) + mixtral_moe_parameters(m, m.num_experts);
}

/// Hugging Face's MixtralConfig of `m`, as its config.json writes it (but torch_dtype).
nlohmann::ordered_json mixtral_hf_config(const MixtralConfig& m) {
  return {{"architectures", {"MixtralForCausalLM"}},
          {"model_type", "mixtral"},
          {"vocab_size", m.vocab_size},
          {"hidden_size", m.n_embd},
          {"intermediate_size", m.intermediate_size},
          {"num_hidden_layers", m.n_layer},
          {"num_attention_heads", m.n_head},
          {"num_key_value_heads", m.n_kv_head},
          {"head_dim", m.n_embd / m.n_head},
          {"max_position_embeddings", m.block_size},
          {"rms_norm_eps", m.rms_norm_eps},
          {"rope_theta", m.rope_theta},
          {"rope_scaling", nullptr},
          {"hidden_act", "silu"},
          {"sliding_window", nullptr},
          {"attention_dropout", 0.0},
          {"num_local_experts", m.num_experts},
          {"num_experts_per_tok", m.experts_per_token},
          {"router_aux_loss_coef", m.router_aux_loss_coef},
          {"router_jitter_noise", 0.0},
          {"output_router_logits", false},
          {"initializer_range", 0.02},
          {"tie_word_embeddings", m.tie_embeddings}};
}

/// Hugging Face's tensors of `m`: Llama's, with each layer's mlp a block_sparse_moe of a router
/// and experts under the same names as ours (NOTE [Hugging Face layout]).
std::vector<HFTensor> mixtral_hf_tensors(const MixtralConfig& m) {
  const int64_t c = m.n_embd, inner = m.intermediate_size;
  return llama_hf_tensors(m, [&m, c, inner](std::vector<HFTensor>& t, const std::string& p) {
    const std::string moe = p + "block_sparse_moe.";
    t.push_back(same_tensor(moe + "gate.weight", {m.num_experts, c}));
    for (int64_t j = 0; j < m.num_experts; ++j) {
      const std::string expert = fmt::format("{}experts.{}.", moe, j);
      t.push_back(same_tensor(expert + "w1.weight", {inner, c}));
      t.push_back(same_tensor(expert + "w2.weight", {c, inner}));
      t.push_back(same_tensor(expert + "w3.weight", {inner, c}));
    }
  });
}

class MixtralFamily : public ModelFamily {
 public:
  std::string name() const override { return "mixtral"; }

  std::vector<FamilyKey> keys() const override { return declared_keys(mixtral_keys()); }

  Objective objective() const override { return Objective::kNextToken; }
  int64_t activation_dims() const override { return 3; }

  void check(const ModelSpec& spec) const override {
    const MixtralConfig m = mixtral_config(spec);
    check_llama_shape(m, spec);
    VS_USER_CHECK(m.experts_per_token <= m.num_experts,
                  "config {}: model.experts_per_token = {} is more than model.num_experts = {}",
                  spec.source, m.experts_per_token, m.num_experts);
    VS_USER_CHECK(m.num_experts % spec.ep == 0,
                  "config {}: model.num_experts = {} does not split over parallel.ep = {}: each ep "
                  "rank holds the same number of experts; use an ep that divides it",
                  spec.source, m.num_experts, spec.ep);
  }

  std::shared_ptr<Module> build(const ModelSpec& spec) const override {
    auto mixtral = std::make_shared<Mixtral>(mixtral_config(spec), spec.tp);
    if (spec.lora.on()) mixtral->add_adapters(spec, lora_roles());
    return mixtral;
  }

  std::vector<std::pair<std::string, std::vector<std::string>>> lora_roles() const override {
    // The experts' projections: every expert's of an adapted block (peft adapts a stacked
    // parameter whole).
    auto roles = llama_attention_lora_roles();
    const std::string expert = "block_sparse_moe.experts.*.";
    roles.push_back({"w1", {expert + "w1"}});
    roles.push_back({"w2", {expert + "w2"}});
    roles.push_back({"w3", {expert + "w3"}});
    roles.push_back({"experts", {expert + "w1", expert + "w2", expert + "w3"}});
    return roles;
  }

  std::vector<Layer> layers(const ModelSpec& spec, Module& model) const override {
    // 6 FLOPs per parameter a token uses (attention, the router, its top-k experts and the
    // shared one) forward and backward, plus attention's 12 C T per token and layer.
    const MixtralConfig m = mixtral_config(spec);
    const double t = static_cast<double>(spec.seq_len), c = static_cast<double>(m.n_embd);
    const double active =
        mixtral_attention_parameters(m) + mixtral_moe_parameters(m, m.experts_per_token);
    std::vector<Layer> out;
    out.push_back({"embedding", {"model.embed_tokens"}, 0.0, LayerKind::kEmbedding});
    for (int64_t i = 0; i < m.n_layer; ++i) {
      const std::string layer = "model.layers." + std::to_string(i);
      out.push_back({layer, {layer}, t * (6.0 * active + 12.0 * c * t), LayerKind::kBlock});
    }
    const double head = static_cast<double>(parameters_under(model, {"model.norm", "lm_head"}));
    out.push_back({"head", {"model.norm", "lm_head"}, 6.0 * t * head, LayerKind::kHead});
    return out;
  }

  double parameter_count(const ModelSpec& spec) const override {
    const MixtralConfig m = mixtral_config(spec);
    const double vocab = static_cast<double>(m.padded_vocab(spec.tp));
    const double e = static_cast<double>(m.n_embd);
    return vocab * e * (m.tie_embeddings ? 1.0 : 2.0) +
           static_cast<double>(m.n_layer) * mixtral_layer_parameters(m) + e;
  }

  double output_elements_per_sample(const ModelSpec& spec) const override {
    return static_cast<double>(spec.seq_len) *
           (static_cast<double>(mixtral_config(spec).vocab_size) / static_cast<double>(spec.tp));
  }

  std::vector<std::string> size_keys() const override {
    return {"n_layer", "n_embd", "intermediate_size", "num_experts", "vocab_size", "block_size"};
  }

  int64_t vocab_size(const ModelSpec& spec) const override {
    return mixtral_config(spec).vocab_size;
  }

  /// The attention projections and each expert's w1, w2 and w3 are hidden (each expert its
  /// own matrices), the router (block_sparse_moe.gate) is not.
  std::vector<ParamRole> param_roles(const ModelSpec& spec, const std::string& fqn) const override {
    if (ends_with(fqn, ".block_sparse_moe.gate.weight")) return {ParamRole::kRouter};
    return llama_param_roles(fqn, mixtral_config(spec).tie_embeddings);
  }
  std::optional<HFLayout> hf_layout(const ModelSpec& spec) const override {
    const MixtralConfig m = mixtral_config(spec);
    VS_USER_CHECK(!m.shared_expert,
                  "[hf] config {}: model.shared_expert = true has no Hugging Face counterpart "
                  "(MixtralForCausalLM has no shared expert); export or import a model without it",
                  spec.source);
    HFLayout out{"MixtralForCausalLM", mixtral_hf_config(m), mixtral_hf_tensors(m), {}};
    out.checked_keys = {{"model_type", ""},
                        {"vocab_size", "model.vocab_size"},
                        {"hidden_size", "model.n_embd"},
                        {"intermediate_size", "model.intermediate_size"},
                        {"num_hidden_layers", "model.n_layer"},
                        {"num_attention_heads", "model.n_head"},
                        {"num_key_value_heads", "model.n_kv_head"},
                        {"num_local_experts", "model.num_experts"},
                        {"num_experts_per_tok", "model.experts_per_token"},
                        {"rms_norm_eps", "model.rms_norm_eps"},
                        {"rope_theta", "model.rope_theta"},
                        {"rope_scaling", ""},
                        {"hidden_act", ""},
                        {"head_dim", ""},
                        {"sliding_window", ""},
                        {"tie_word_embeddings", "model.tie_embeddings"}};
    // transformers' MixtralConfig writes head_dim as null: hidden_size / num_attention_heads.
    out.also_accepted = {{"head_dim", nullptr}};
    out.ignored_suffixes = {".rotary_emb.inv_freq"};
    out.hf_defaults = {{"num_local_experts", 8}, {"num_experts_per_tok", 2}};
    if (m.tie_embeddings) out.ignored_suffixes.push_back("lm_head.weight");
    // transformers stacks each layer's experts: w1 and w3 as gate_up_proj [E, 2I, C] (w1's rows
    // first), w2 as down_proj [E, C, I]; peft adapts those parameters (target_parameters).
    const int64_t inner = m.intermediate_size, e = m.num_experts;
    out.stacked_order = {"gate_up_proj", "down_proj"};
    for (int64_t i = 0; i < m.n_layer; ++i) {
      const std::string ours = fmt::format("model.layers.{}.block_sparse_moe.experts.", i);
      const std::string theirs = fmt::format("model.layers.{}.mlp.experts.", i);
      for (int64_t j = 0; j < e; ++j) {
        const std::string expert = ours + std::to_string(j) + ".";
        out.linears[expert + "w1"] = {theirs + "gate_up_proj", 0, 2 * inner, j, e};
        out.linears[expert + "w3"] = {theirs + "gate_up_proj", inner, 2 * inner, j, e};
        out.linears[expert + "w2"] = {theirs + "down_proj", 0, m.n_embd, j, e};
      }
    }
    return out;
  }

  std::optional<TransformerShape> transformer_shape(const ModelSpec& spec) const override {
    const MixtralConfig m = mixtral_config(spec);
    return TransformerShape{
        m.n_layer, m.n_embd, m.n_head, m.vocab_size, "model.embed_tokens.weight",
        mixtral_attention_parameters(m) + mixtral_moe_parameters(m, m.experts_per_token),
        m.num_experts, m.experts_per_token,
        // The routed experts only: the router and the shared expert are every rank's.
        mixtral_expert_parameters(m, static_cast<double>(m.num_experts))};
  }
};

}  // namespace

std::shared_ptr<const ModelFamily> mixtral_family() {
  return std::make_shared<MixtralFamily>();
}

}  // namespace vescale::models
