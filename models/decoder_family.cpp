// The decoder family, one per variant (models/decoder_variants.h): its [model] keys, and what the
// rest of the program asks of a Llama or a Mixtral.
#include "models/decoder_family.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "family/bound_keys.h"
#include "family/hf_layout.h"
#include "models/families.h"

namespace vescale::models {
namespace {

using Keys = std::vector<BoundKey<DecoderConfig>>;

const Keys& shared_keys() {
  using C = DecoderConfig;
  static const Keys keys = {
      {{"vocab_size", int64_t{256}, "Llama vocabulary", at_least(1)}, &C::vocab_size},
      {{"block_size", int64_t{64}, "Llama longest sequence (max_position_embeddings)", at_least(1)},
       &C::block_size},
      {{"n_layer", int64_t{2}, "Llama decoder layers", at_least(1)}, &C::n_layer},
      {{"n_head", int64_t{4}, "Llama query heads", at_least(1)}, &C::n_head},
      {{"n_kv_head", int64_t{4}, "Llama key/value heads (grouped-query attention; divides n_head)",
        at_least(1)},
       &C::n_kv_head},
      {{"n_embd", int64_t{64}, "Llama hidden size (n_head x an even head size)", at_least(2)},
       &C::n_embd},
      {{"intermediate_size", int64_t{172}, "Llama SwiGLU MLP inner size", at_least(1)},
       &C::intermediate_size},
      {{"rope_theta", 10000.0, "Llama rotary embedding base", above(0)}, &C::rope_theta},
      {{"rms_norm_eps", 1e-5, "Llama RMSNorm epsilon", above(0)}, &C::rms_norm_eps},
      {{"tie_embeddings", false, "Llama lm_head shares model.embed_tokens.weight"},
       &C::tie_embeddings},
      {{"vocab_multiple", int64_t{64}, "Vocabulary padded to a multiple of this x tp",
        within(1, 1 << 20), KeyRole::kLayout},
       &C::vocab_multiple},
  };
  return keys;
}

/// The mixture's keys (DecoderMlp::kExperts), listed after intermediate_size.
const Keys& expert_keys() {
  using C = DecoderConfig;
  static const Keys keys = {
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
  return keys;
}

/// `list` with `extra` after its entry named "intermediate_size".
template <typename T, typename Name>
std::vector<T> after_intermediate_size(std::vector<T> list, const std::vector<T>& extra,
                                       Name name) {
  const auto at = std::find_if(list.begin(), list.end(),
                               [&](const T& entry) { return name(entry) == "intermediate_size"; });
  list.insert(at + 1, extra.begin(), extra.end());
  return list;
}

/// One layer's attention (q and o C x C, k and v C x kv) and its two norms.
double attention_parameters(const DecoderConfig& c) {
  const double e = static_cast<double>(c.n_embd), kv = static_cast<double>(c.kv_width());
  return 2.0 * e * e + 2.0 * e * kv + 2.0 * e;
}

/// One SwiGLU's: gate and up [I, C], down [C, I].
double swiglu_parameters(const DecoderConfig& c) {
  return 3.0 * static_cast<double>(c.n_embd) * static_cast<double>(c.intermediate_size);
}

/// One layer's MLP parameters a token goes through when `experts` of the routed experts hold it
/// (the router and a shared expert count always; a SwiGLU has no experts).
double mlp_parameters(const DecoderConfig& c, int64_t experts) {
  if (c.mlp == DecoderMlp::kSwiGLU) return swiglu_parameters(c);
  const double routed = static_cast<double>(experts) + (c.shared_expert ? 1.0 : 0.0);
  return static_cast<double>(c.n_embd) * static_cast<double>(c.num_experts) +
         routed * swiglu_parameters(c);
}

/// One layer's parameters a token computes with: the attention and its top-k experts.
double active_layer_parameters(const DecoderConfig& c) {
  return attention_parameters(c) + mlp_parameters(c, c.experts_per_token);
}

class DecoderFamily : public ModelFamily {
 public:
  explicit DecoderFamily(DecoderVariant variant)
      : v_(std::move(variant)),
        keys_(v_.mlp == DecoderMlp::kSwiGLU
                  ? shared_keys()
                  : after_intermediate_size(shared_keys(), expert_keys(),
                                            [](const auto& k) { return k.key.name; })) {}

  std::string name() const override { return v_.name; }
  std::vector<FamilyKey> keys() const override { return declared_keys(keys_); }
  Objective objective() const override { return Objective::kNextToken; }
  int64_t activation_dims() const override { return 3; }

  void check(const ModelSpec& spec) const override {
    const DecoderConfig c = config(spec);
    VS_USER_CHECK(spec.seq_len <= c.block_size,
                  "config {}: training.seq_len = {} is longer than model.block_size = {}",
                  spec.source, spec.seq_len, c.block_size);
    VS_USER_CHECK(c.n_embd % c.n_head == 0 && (c.n_embd / c.n_head) % 2 == 0,
                  "config {}: model.n_embd = {} must be model.n_head = {} x an even head size "
                  "(rotary embeddings turn pairs of a head's dims)",
                  spec.source, c.n_embd, c.n_head);
    VS_USER_CHECK(c.n_head % c.n_kv_head == 0,
                  "config {}: model.n_kv_head = {} must divide model.n_head = {} (each key/value "
                  "head serves a group of query heads)",
                  spec.source, c.n_kv_head, c.n_head);
    if (c.mlp == DecoderMlp::kSwiGLU) return;
    VS_USER_CHECK(c.experts_per_token <= c.num_experts,
                  "config {}: model.experts_per_token = {} is more than model.num_experts = {}",
                  spec.source, c.experts_per_token, c.num_experts);
    VS_USER_CHECK(c.num_experts % spec.ep == 0,
                  "config {}: model.num_experts = {} does not split over parallel.ep = {}: each ep "
                  "rank holds the same number of experts; use an ep that divides it",
                  spec.source, c.num_experts, spec.ep);
  }

  std::shared_ptr<Module> build(const ModelSpec& spec) const override {
    auto decoder = std::make_shared<Decoder>(config(spec), v_.types, spec.tp);
    if (spec.lora.on()) decoder->add_adapters(spec, lora_roles());
    return decoder;
  }

  std::vector<std::pair<std::string, std::vector<std::string>>> lora_roles() const override {
    std::vector<std::pair<std::string, std::vector<std::string>>> roles = {
        {"q", {"self_attn.q_proj"}},
        {"k", {"self_attn.k_proj"}},
        {"v", {"self_attn.v_proj"}},
        {"qkv", {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"}},
        {"o", {"self_attn.o_proj"}}};
    if (v_.mlp == DecoderMlp::kSwiGLU) {
      roles.insert(
          roles.end(),
          {{"up", {"mlp.up_proj"}}, {"gate", {"mlp.gate_proj"}}, {"down", {"mlp.down_proj"}}});
      return roles;
    }
    // The experts' projections: every expert's of an adapted block (peft adapts a stacked
    // parameter whole).
    const std::string expert = "block_sparse_moe.experts.*.";
    roles.insert(roles.end(), {{"w1", {expert + "w1"}},
                               {"w2", {expert + "w2"}},
                               {"w3", {expert + "w3"}},
                               {"experts", {expert + "w1", expert + "w2", expert + "w3"}}});
    return roles;
  }

  std::vector<Layer> layers(const ModelSpec& spec, Module& model) const override {
    // 6 FLOPs per parameter a token uses (a layer's all but the experts the router did not pick)
    // forward and backward, plus attention's 12 C T per token and layer (scores and values,
    // over every query head).
    const DecoderConfig c = config(spec);
    const double t = static_cast<double>(spec.seq_len), e = static_cast<double>(c.n_embd);
    const double unpicked =
        c.mlp == DecoderMlp::kExperts
            ? static_cast<double>(c.num_experts - c.experts_per_token) * swiglu_parameters(c)
            : 0.0;
    auto params = [&](const std::vector<std::string>& modules) {
      return static_cast<double>(parameters_under(model, modules));
    };
    std::vector<Layer> out;
    // The embedding is a lookup: no matmul FLOPs.
    out.push_back({"embedding", {"model.embed_tokens"}, 0.0, LayerKind::kEmbedding});
    for (int64_t i = 0; i < c.n_layer; ++i) {
      const std::string layer = "model.layers." + std::to_string(i);
      const double active = params({layer}) - unpicked;
      out.push_back({layer, {layer}, t * (6.0 * active + 12.0 * e * t), LayerKind::kBlock});
    }
    out.push_back({"head",
                   {"model.norm", "lm_head"},
                   6.0 * t * params({"model.norm", "lm_head"}),
                   LayerKind::kHead});
    return out;
  }

  double parameter_count(const ModelSpec& spec) const override {
    const DecoderConfig c = config(spec);
    const double vocab = static_cast<double>(c.padded_vocab(spec.tp));
    const double e = static_cast<double>(c.n_embd);
    const double layer = attention_parameters(c) + mlp_parameters(c, c.num_experts);
    return vocab * e * (c.tie_embeddings ? 1.0 : 2.0) + static_cast<double>(c.n_layer) * layer + e;
  }

  double output_elements_per_sample(const ModelSpec& spec) const override {
    return static_cast<double>(spec.seq_len) *
           (static_cast<double>(config(spec).vocab_size) / static_cast<double>(spec.tp));
  }

  std::vector<std::string> size_keys() const override {
    const std::vector<std::string> keys = {"n_layer", "n_embd", "intermediate_size", "vocab_size",
                                           "block_size"};
    if (v_.mlp == DecoderMlp::kSwiGLU) return keys;
    return after_intermediate_size(keys, {"num_experts"}, [](const auto& k) { return k; });
  }

  int64_t vocab_size(const ModelSpec& spec) const override { return config(spec).vocab_size; }

  /// The attention and MLP projections (each expert's w1, w2 and w3) are hidden (NOTE [Muon]),
  /// a router (block_sparse_moe.gate) is not.
  std::vector<ParamRole> param_roles(const ModelSpec& spec, const std::string& fqn) const override {
    if (fqn == "model.embed_tokens.weight")
      return config(spec).tie_embeddings ? std::vector{ParamRole::kEmbedding, ParamRole::kLmHead}
                                         : std::vector{ParamRole::kEmbedding};
    if (fqn == "lm_head.weight") return {ParamRole::kLmHead};
    if (ends_with(fqn, "norm.weight")) return {ParamRole::kNorm};
    if (ends_with(fqn, ".block_sparse_moe.gate.weight")) return {ParamRole::kRouter};
    return {ParamRole::kHidden};
  }

  std::optional<HFLayout> hf_layout(const ModelSpec& spec) const override {
    return decoder_hf_layout(v_, config(spec), spec);
  }

  std::optional<TransformerShape> transformer_shape(const ModelSpec& spec) const override {
    const DecoderConfig c = config(spec);
    TransformerShape shape{c.n_layer,
                           c.n_embd,
                           c.n_head,
                           c.vocab_size,
                           "model.embed_tokens.weight",
                           active_layer_parameters(c)};
    if (c.mlp == DecoderMlp::kExperts) {
      shape.experts = c.num_experts;
      shape.experts_per_token = c.experts_per_token;
      // The routed experts only: the router and the shared expert are every rank's.
      shape.expert_parameters = static_cast<double>(c.num_experts) * swiglu_parameters(c);
    }
    return shape;
  }

 private:
  DecoderConfig config(const ModelSpec& spec) const {
    DecoderConfig c = read_keys(keys_, spec.keys);
    c.mlp = v_.mlp;
    c.fused_projections = spec.fused_projections;
    return c;
  }

  DecoderVariant v_;
  Keys keys_;
};

}  // namespace

std::shared_ptr<const ModelFamily> decoder_family(const DecoderVariant& variant) {
  return std::make_shared<DecoderFamily>(variant);
}

}  // namespace vescale::models
