// The gpt family: its [model] keys, and what the rest of the program asks of a GPT.
#include <fmt/format.h>

#include <array>
#include <cmath>

#include "core/error.h"
#include "family/bound_keys.h"
#include "family/hf_layout.h"
#include "models/families.h"
#include "models/gpt.h"

namespace vescale::models {
namespace {

const std::vector<BoundKey<GPTConfig>>& gpt_keys() {
  static const std::vector<BoundKey<GPTConfig>> keys = {
      {{"vocab_size", int64_t{256}, "GPT vocabulary (text data: 256 bytes)", at_least(1)},
       &GPTConfig::vocab_size},
      {{"block_size", int64_t{64}, "GPT longest sequence (wpe rows)", at_least(1)},
       &GPTConfig::block_size},
      {{"n_layer", int64_t{2}, "GPT blocks", at_least(1)}, &GPTConfig::n_layer},
      {{"n_head", int64_t{4}, "GPT attention heads", at_least(1)}, &GPTConfig::n_head},
      {{"n_embd", int64_t{64}, "GPT hidden size", at_least(1)}, &GPTConfig::n_embd},
      {{"dropout", 0.0, "GPT dropout probability", half_open(0, 1), KeyRole::kTraining},
       &GPTConfig::dropout},
      {{"vocab_multiple", int64_t{64}, "Vocabulary padded to a multiple of this x tp",
        within(1, 1 << 20), KeyRole::kLayout},
       &GPTConfig::vocab_multiple},
  };
  return keys;
}

GPTConfig gpt_config(const ModelSpec& spec) {
  GPTConfig g = read_keys(gpt_keys(), spec.keys);
  g.fused_projections = spec.fused_projections;
  return g;
}

class GPTFamily : public ModelFamily {
 public:
  std::string name() const override { return "gpt"; }

  std::vector<FamilyKey> keys() const override { return declared_keys(gpt_keys()); }

  Objective objective() const override { return Objective::kNextToken; }
  int64_t activation_dims() const override { return 3; }

  void check(const ModelSpec& spec) const override {
    const int64_t block_size = gpt_config(spec).block_size;
    VS_USER_CHECK(spec.seq_len <= block_size,
                  "config {}: training.seq_len = {} is longer than model.block_size = {}",
                  spec.source, spec.seq_len, block_size);
  }

  std::shared_ptr<Module> build(const ModelSpec& spec) const override {
    auto gpt = std::make_shared<GPT>(gpt_config(spec), spec.tp);
    gpt->set_dropout_seed(spec.seed);
    if (spec.lora.on()) gpt->add_adapters(spec, lora_roles());
    return gpt;
  }

  std::vector<std::pair<std::string, std::vector<std::string>>> lora_roles() const override {
    return {{"q", {"attn.q_proj"}},  {"k", {"attn.k_proj"}},
            {"v", {"attn.v_proj"}},  {"qkv", {"attn.q_proj", "attn.k_proj", "attn.v_proj"}},
            {"o", {"attn.c_proj"}},  {"fc", {"mlp.c_fc"}},
            {"proj", {"mlp.c_proj"}}};
  }

  std::vector<Layer> layers(const ModelSpec& spec, Module& model) const override {
    // 6 FLOPs per parameter per token for the matmuls forward and backward, plus attention's
    // 12 C T per token and block. The tied wte/lm_head weight is the head's matmul.
    const GPTConfig g = gpt_config(spec);
    const double t = static_cast<double>(spec.seq_len), c = static_cast<double>(g.n_embd);
    auto params = [&](const std::vector<std::string>& modules) {
      return static_cast<double>(parameters_under(model, modules));
    };
    std::vector<Layer> out;
    const std::vector<std::string> embedding{"transformer.wte", "transformer.wpe",
                                             "transformer.drop"};
    out.push_back(
        {"embedding", embedding, 6.0 * t * params({"transformer.wpe"}), LayerKind::kEmbedding});
    for (int64_t i = 0; i < g.n_layer; ++i) {
      const std::string block = "transformer.h." + std::to_string(i);
      out.push_back(
          {block, {block}, t * (6.0 * params({block}) + 12.0 * c * t), LayerKind::kBlock});
    }
    const std::vector<std::string> head{"transformer.ln_f", "lm_head"};
    out.push_back({"head", head, 6.0 * t * params({"transformer.ln_f", "transformer.wte"}),
                   LayerKind::kHead});
    return out;
  }

  double parameter_count(const ModelSpec& spec) const override {
    const ModelKeys& k = spec.keys;
    const double multiple = static_cast<double>(std::max<int64_t>(1, k.integer("vocab_multiple"))) *
                            static_cast<double>(spec.tp);
    const double vocab = std::ceil(k.number("vocab_size") / multiple) * multiple;
    const double e = k.number("n_embd");
    // wte, wpe, per block q/k/v/c_proj + c_fc/c_proj + two LayerNorms, ln_f.
    return vocab * e + k.number("block_size") * e +
           k.number("n_layer") * (12.0 * e * e + 13.0 * e) + 2.0 * e;
  }

  double output_elements_per_sample(const ModelSpec& spec) const override {
    return static_cast<double>(spec.seq_len) *
           (static_cast<double>(gpt_config(spec).vocab_size) / static_cast<double>(spec.tp));
  }

  std::vector<std::string> size_keys() const override {
    return {"n_layer", "n_embd", "vocab_size", "block_size"};
  }

  int64_t vocab_size(const ModelSpec& spec) const override { return gpt_config(spec).vocab_size; }

  /// The token embedding is the LM head too (tied); the blocks' attention and MLP weights are
  /// hidden.
  std::vector<ParamRole> param_roles(const ModelSpec&, const std::string& fqn) const override {
    const bool norm = fqn.find(".ln_") != std::string::npos;
    if (ends_with(fqn, ".bias"))
      return norm ? std::vector{ParamRole::kNorm, ParamRole::kBias} : std::vector{ParamRole::kBias};
    if (norm) return {ParamRole::kNorm};
    if (fqn == "transformer.wte.weight" || fqn == "lm_head.weight")
      return {ParamRole::kEmbedding, ParamRole::kLmHead};
    if (fqn == "transformer.wpe.weight") return {ParamRole::kEmbedding};
    return {ParamRole::kHidden};
  }
  std::optional<HFLayout> hf_layout(const ModelSpec& spec) const override {
    const GPTConfig g = gpt_config(spec);
    const int64_t c = g.n_embd;
    HFLayout out{"GPT2LMHeadModel", {}, {}, {}};
    out.config = {{"architectures", {"GPT2LMHeadModel"}},
                  {"model_type", "gpt2"},
                  {"vocab_size", g.vocab_size},
                  {"n_positions", g.block_size},
                  {"n_ctx", g.block_size},
                  {"n_embd", c},
                  {"n_layer", g.n_layer},
                  {"n_head", g.n_head},
                  {"n_inner", nullptr},
                  {"activation_function", "gelu"},  // exact (erf) GELU, as ops::gelu
                  {"resid_pdrop", g.dropout},
                  {"embd_pdrop", g.dropout},
                  {"attn_pdrop", 0.0},  // no dropout on the attention probabilities
                  {"layer_norm_epsilon", 1e-5},
                  {"initializer_range", 0.02},
                  {"scale_attn_weights", true},
                  {"tie_word_embeddings", true}};
    out.checked_keys = {{"model_type", ""},
                        {"vocab_size", "model.vocab_size"},
                        {"n_positions", "model.block_size"},
                        {"n_embd", "model.n_embd"},
                        {"n_layer", "model.n_layer"},
                        {"n_head", "model.n_head"},
                        {"n_inner", "4 x model.n_embd"},
                        {"activation_function", ""},
                        {"layer_norm_epsilon", ""},
                        {"tie_word_embeddings", ""}};
    out.also_accepted = {{"n_inner", 4 * c}};
    out.ignored_suffixes = {".attn.bias", ".attn.masked_bias", "lm_head.weight"};
    out.conv1d = true;
    for (int64_t i = 0; i < g.n_layer; ++i) {
      const std::string attn = "transformer.h." + std::to_string(i) + ".attn.";
      for (int64_t j = 0; j < 3; ++j)
        out.linears[attn + std::array<const char*, 3>{"q_proj", "k_proj", "v_proj"}[j]] = {
            attn + "c_attn", j * c, 3 * c};
    }
    auto& t = out.tensors;
    t.push_back(vocab_rows("transformer.wte.weight", "transformer.wte.weight", g.vocab_size, c));
    t.push_back(same_tensor("transformer.wpe.weight", {g.block_size, c}));
    for (int64_t i = 0; i < g.n_layer; ++i) {
      const std::string h = "transformer.h." + std::to_string(i) + ".";
      for (const char* p : {"ln_1.weight", "ln_1.bias"})
        t.push_back(same_tensor(h + p, {c}));
      const std::string a = h + "attn.";
      t.push_back(concatenated(a + "c_attn.weight",
                               {a + "q_proj.weight", a + "k_proj.weight", a + "v_proj.weight"}, c,
                               {c}, true));
      t.push_back(concatenated(a + "c_attn.bias",
                               {a + "q_proj.bias", a + "k_proj.bias", a + "v_proj.bias"}, c, {},
                               false));
      t.push_back(transposed(a + "c_proj.weight", c, c));
      t.push_back(same_tensor(a + "c_proj.bias", {c}));
      for (const char* p : {"ln_2.weight", "ln_2.bias"})
        t.push_back(same_tensor(h + p, {c}));
      t.push_back(transposed(h + "mlp.c_fc.weight", c, 4 * c));
      t.push_back(same_tensor(h + "mlp.c_fc.bias", {4 * c}));
      t.push_back(transposed(h + "mlp.c_proj.weight", 4 * c, c));
      t.push_back(same_tensor(h + "mlp.c_proj.bias", {c}));
    }
    for (const char* p : {"transformer.ln_f.weight", "transformer.ln_f.bias"})
      t.push_back(same_tensor(p, {c}));
    return out;  // lm_head.weight is wte's: not stored
  }

  std::optional<TransformerShape> transformer_shape(const ModelSpec& spec) const override {
    const ModelKeys& k = spec.keys;
    const double e = k.number("n_embd");
    return TransformerShape{k.integer("n_layer"),     k.integer("n_embd"),
                            k.integer("n_head"),      k.integer("vocab_size"),
                            "transformer.wte.weight", 12.0 * e * e + 13.0 * e};
  }
};

}  // namespace

std::shared_ptr<const ModelFamily> gpt_family() {
  return std::make_shared<GPTFamily>();
}

}  // namespace vescale::models
