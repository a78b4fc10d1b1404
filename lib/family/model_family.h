// A model family (gpt, mlp, ...): what the rest of the program knows of a model. A family declares
// its [model] keys (in the config schema, with defaults and ranges), builds the model from them,
// lists its layers for the pipeline, and counts its parameters and FLOPs for the memory estimate,
// MFU and plan auto's cost model. Nothing outside models/ names a concrete model type; models/
// families.cpp is the registry (docs/design.md §8).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/config_value.h"
#include "core/enum_names.h"
#include "dmodule/module.h"

namespace vescale {

/// What a [model] key is to a checkpoint: whether a run that loads one must have the same value.
enum class KeyRole {
  kArchitecture,  ///< shapes the parameters or what they compute: must match to resume or eval
  kTraining,      ///< changes only the training function (dropout): must match to resume
  kLayout,        ///< how the same parameters are stored (vocabulary padding): never compared
};

/// One [model] key a family reads.
struct FamilyKey {
  std::string name;  ///< without "model.": "n_layer"
  ConfigValue default_value;
  std::string help;
  std::optional<ConfigRange> range = std::nullopt;
  KeyRole role = KeyRole::kArchitecture;
};

/// The [model] keys' values, by name without "model.".
class ModelKeys {
 public:
  void set(const std::string& name, ConfigValue value);
  const ConfigValue& at(const std::string& name) const;
  /// The value of an integer key; throws naming the key when it is absent or not an integer.
  int64_t integer(const std::string& name) const;
  /// The value of a numeric key.
  double number(const std::string& name) const;
  /// The value of a true-or-false key.
  bool boolean(const std::string& name) const;
  bool operator==(const ModelKeys& other) const { return values_ == other.values_; }
  bool operator!=(const ModelKeys& other) const { return !(*this == other); }

 private:
  std::map<std::string, ConfigValue> values_;
};

/// What [lora] asks for (NOTE [LoRA]): low-rank adapters on the projections of `targets` (roles,
/// ModelFamily::lora_roles) in the blocks `layers` (empty: all), the rest of the model frozen.
struct LoraSpec {
  int64_t rank = 0;  ///< 0: no adapters, every parameter trains
  double alpha = 16;
  double dropout = 0;
  std::vector<std::string> targets;
  std::vector<int64_t> layers;

  bool on() const { return rank > 0; }
  /// alpha / rank: what the adapters' product is scaled by.
  double scaling() const { return alpha / static_cast<double>(rank); }
};

/// What a family builds a model from: its keys, and the facts of the job that shape the model.
struct ModelSpec {
  std::string source;  ///< the config file, for messages
  ModelKeys keys;
  int64_t tp = 1;                 ///< the tensor-parallel degree (the vocabulary is padded for it)
  int64_t seq_len = 1;            ///< tokens per sample of a next-token family (FLOPs per sample)
  uint64_t seed = 0;              ///< seed of the dropout masks
  bool fused_projections = true;  ///< training.fused_projections (NOTE [Fused projections])
  int64_t cp = 1;                 ///< the context-parallel degree (a sequence split over cp ranks)
  int64_t ep = 1;                 ///< the expert-parallel degree (a layer's experts over ep ranks)
  LoraSpec lora = {};             ///< adapters the model is built with (NOTE [LoRA])
};

/// What a family's models learn: the task the trainer builds for it.
enum class Objective {
  kNextToken,   ///< token data, next-token cross entropy
  kRegression,  ///< a teacher's synthetic samples, mean squared error
};

enum class LayerKind { kEmbedding, kBlock, kHead, kOther };

/// What a parameter is to the optimizer: under Muon (NOTE [Muon]) the 2-D weights of the roles
/// optimizer.adamw_params names take AdamW, the hidden layers' matrices Muon.
enum class ParamRole {
  kEmbedding,  ///< the input layer: token and position embeddings (an MLP's first layer)
  kLmHead,     ///< the output layer: the LM head (an MLP's last layer)
  kNorm,       ///< a norm's weight or bias
  kBias,       ///< a bias
  kRouter,     ///< a mixture's router
  kHidden,     ///< a hidden layer's weight (an expert's weights each one of its own)
};
/// ParamRole <-> "embedding", "lm_head", "norm", "bias", "router", "hidden".
const EnumNames<ParamRole>& param_role_names();

/// A layer of the model in forward order (GPT: the embeddings, each block, the head with the
/// loss), what a pipeline stage is cut from.
struct Layer {
  std::string name;                  ///< "embedding", "transformer.h.3", "head"
  std::vector<std::string> modules;  ///< FQNs of the modules it runs
  double flops_per_sample = 0;       ///< forward + backward
  LayerKind kind = LayerKind::kOther;
};

/// The sizes of a decoder-only transformer, what plan auto's cost model reads.
struct TransformerShape {
  int64_t n_layer = 0, n_embd = 0, n_head = 0;
  int64_t vocab_size = 0;    ///< unpadded
  std::string vocab_weight;  ///< FQN of the [vocab, n_embd] embedding weight
  /// Elements of the parameters one block computes a token with (GPT: 12 C^2 + 13 C; a mixture
  /// of experts: its router and top-k experts only), what its FLOPs are counted from.
  double block_parameters = 0;
  /// A mixture of experts (every block one MoE layer): its experts, the experts each token goes
  /// to (top-k), and the elements of one block's routed experts, all of them: what parallel.ep
  /// splits (NOTE [Expert parallelism]). 0 when dense.
  int64_t experts = 0;
  int64_t experts_per_token = 0;
  double expert_parameters = 0;
};

struct HFLayout;  // family/hf_layout.h

class ModelFamily {
 public:
  virtual ~ModelFamily() = default;

  /// "gpt": the value of model.name.
  virtual std::string name() const = 0;
  /// Its [model] keys besides model.name, in the order the config reference lists them.
  virtual std::vector<FamilyKey> keys() const = 0;
  virtual Objective objective() const = 0;
  /// The most dims a module input or output has ([batch, seq, hidden]: 3), which bounds the
  /// shard dims of a plan's forward rules.
  virtual int64_t activation_dims() const = 0;
  /// Throws UserError naming the keys when they do not fit together or with the job.
  virtual void check(const ModelSpec& spec) const;

  /// The model, parameters declared and not allocated (parallelize_module materialises them).
  virtual std::shared_ptr<Module> build(const ModelSpec& spec) const = 0;
  /// The layers of `model` (a model this family built from `spec`), in forward order.
  virtual std::vector<Layer> layers(const ModelSpec& spec, Module& model) const = 0;

  /// Parameters from the keys alone, nothing built (the padded vocabulary included).
  virtual double parameter_count(const ModelSpec& spec) const = 0;
  /// The output's elements per sample on one tp rank (logits: seq_len x vocab / tp).
  virtual double output_elements_per_sample(const ModelSpec& spec) const = 0;
  /// The keys that size the model, as a message about its memory names them.
  virtual std::vector<std::string> size_keys() const = 0;

  /// Next-token families: the vocabulary (every token id is below it).
  virtual int64_t vocab_size(const ModelSpec& spec) const;
  /// Regression families: the features of a sample in and out.
  virtual std::pair<int64_t, int64_t> features(const ModelSpec& spec) const;
  /// Transformer families: the sizes plan auto's cost model reads (nullopt: not a transformer).
  virtual std::optional<TransformerShape> transformer_shape(const ModelSpec& spec) const;
  /// The experts of each MoE layer (what parallel.ep splits), from transformer_shape(); 0: a
  /// dense model.
  int64_t experts_per_layer(const ModelSpec& spec) const;
  /// Families with a Hugging Face counterpart: how its tensors and config map to ours
  /// (family/hf_layout.h); nullopt: none.
  virtual std::optional<HFLayout> hf_layout(const ModelSpec& spec) const;
  /// The roles of parameter `fqn` (NOTE [Muon]): one, or two for a weight the embedding and the
  /// LM head share, or a norm's bias.
  virtual std::vector<ParamRole> param_roles(const ModelSpec& spec,
                                             const std::string& fqn) const = 0;
  /// The projections lora.targets may name, role by role: {"q", {"self_attn.q_proj"}}, the
  /// Linears' names under a block (NOTE [LoRA]). Empty: the family takes no adapters.
  virtual std::vector<std::pair<std::string, std::vector<std::string>>> lora_roles() const {
    return {};
  }
};

/// Every family, in the order the config reference lists them, the default (model.name's) first
/// (defined in models/families.cpp).
const std::vector<std::shared_ptr<const ModelFamily>>& model_families();
/// The family named `name`; throws UserError listing the families (with "did you mean").
const ModelFamily& model_family(const std::string& name);
/// The families' names in order: {"gpt", "mlp"}.
std::vector<std::string> model_family_names();
/// Whether `text` ends with `suffix`.
inline bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}
/// Whether `fqn` names something inside one of `modules` (module FQNs).
bool under_modules(const std::string& fqn, const std::vector<std::string>& modules);
/// Elements of the parameters (each once) of the modules named by `modules` and their children.
int64_t parameters_under(Module& model, const std::vector<std::string>& modules);
/// "model.k = v, ..." for `keys` of `spec`: the sizes a message names.
std::string describe_keys(const ModelSpec& spec, const std::vector<std::string>& keys);

}  // namespace vescale
