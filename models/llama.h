// A Llama-style decoder (Hugging Face's LlamaForCausalLM): RMSNorm, rotary position embeddings,
// grouped-query attention and a SwiGLU MLP, no biases; parameter names are Hugging Face's
// (docs/design.md §8).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dmodule/module.h"
#include "family/bound_keys.h"
#include "family/hf_layout.h"
#include "models/decoder_lm.h"
#include "models/layers.h"

namespace vescale::models {

struct LlamaConfig {
  int64_t vocab_size = 256;
  int64_t block_size = 64;  ///< longest sequence (max_position_embeddings)
  int64_t n_layer = 2;
  int64_t n_head = 4;
  int64_t n_kv_head = 4;  ///< key/value heads; divides n_head (grouped-query attention)
  int64_t n_embd = 64;
  int64_t intermediate_size = 172;
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-5;
  bool tie_embeddings = false;
  /// The vocabulary is padded to a multiple of vocab_multiple x tp; padded logits are masked.
  int64_t vocab_multiple = 64;
  /// q, k and v, and gate and up, as one GEMM each (NOTE [Fused projections]).
  bool fused_projections = true;

  int64_t padded_vocab(int64_t tp) const;
};

/// The llama family's [model] keys (models/llama_family.cpp), each bound to its LlamaConfig member.
const std::vector<BoundKey<LlamaConfig>>& llama_keys();

/// The config check of a Llama's shape (and of families built on it): seq_len within block_size,
/// an even head size, n_kv_head dividing n_head. One line naming the keys on failure.
void check_llama_shape(const LlamaConfig& config, const ModelSpec& spec);

/// Adds a decoder layer's MLP tensors, Hugging Face's names under the layer's prefix
/// ("model.layers.3."), to a list.
using LayerMlpTensors = std::function<void(std::vector<HFTensor>&, const std::string& prefix)>;
/// Hugging Face's tensors of a Llama-shaped decoder in the order they are written: the embedding,
/// each layer's attention, its MLP (`mlp`) and norms, the final norm and an untied lm_head.
std::vector<HFTensor> llama_hf_tensors(const LlamaConfig& config, const LayerMlpTensors& mlp);
/// The roles of a Llama-named parameter (NOTE [Muon]): the embedding (the LM head too when
/// `tied`), the head, the norms, and the projections, hidden.
std::vector<ParamRole> llama_param_roles(const std::string& fqn, bool tied);
/// The attention projections by LoRA role (NOTE [LoRA]): q, k, v, o and qkv.
std::vector<std::pair<std::string, std::vector<std::string>>> llama_attention_lora_roles();

/// RMS norm over the last dim (weight 1).
class RMSNorm : public Module {
 public:
  RMSNorm(int64_t dim, double eps);

  /// (x + delta, this norm of the sum), as LayerNorm::after_add (ops::add_rms_norm).
  std::pair<DTensor, DTensor> after_add(const DTensor& x, const DTensor& delta);

 protected:
  Tensors forward(const Tensors& inputs) override;

 private:
  double eps_;
};

/// Grouped-query causal self-attention with rotary embeddings: q_proj, k_proj, v_proj, o_proj.
class LlamaAttention : public Module {
 public:
  explicit LlamaAttention(const LlamaConfig& config);

 protected:
  Tensors forward(const Tensors& inputs) override;

 private:
  int64_t n_head_, n_kv_head_, head_dim_;
  double rope_theta_;
  bool fused_projections_;
  std::shared_ptr<Linear> q_, k_, v_, o_;
};

/// down_proj(silu(gate_proj(x)) * up_proj(x)).
class LlamaMLP : public Module {
 public:
  explicit LlamaMLP(const LlamaConfig& config);

 protected:
  Tensors forward(const Tensors& inputs) override;

 private:
  bool fused_projections_;
  std::shared_ptr<Linear> gate_, up_, down_;
};

class LlamaDecoderLayer : public Module {
 public:
  explicit LlamaDecoderLayer(const LlamaConfig& config);
  /// The same layer around another MLP (Mixtral's mixture of experts), registered as `mlp_name`,
  /// the layer's module type `type`.
  LlamaDecoderLayer(const LlamaConfig& config, const std::string& type, const std::string& mlp_name,
                    std::shared_ptr<Module> mlp);

 protected:
  Tensors forward(const Tensors& inputs) override;

 private:
  std::shared_ptr<Module> input_norm_, attn_, mlp_;
  std::shared_ptr<RMSNorm> post_norm_;
};

/// Layers (DecoderLM): 0: the token embedding; 1..n_layer: the decoder layers; n_layer + 1: the
/// final norm and lm_head (tied to the embedding or its own). No dropout.
class Llama : public DecoderLM {
 public:
  /// `tp` only sets the vocabulary padding.
  Llama(const LlamaConfig& config, int64_t tp = 1);
  const LlamaConfig& config() const { return config_; }

 protected:
  /// Decoder layer `i` of a Llama-shaped model.
  using LayerFactory = std::function<std::shared_ptr<Module>(int64_t i)>;
  /// A Llama-shaped model (module type `type`, "Mixtral") whose decoder layers come from
  /// `layer`: the embedding, final norm and head are Llama's.
  Llama(const std::string& type, const LlamaConfig& config, int64_t tp, const LayerFactory& layer);
  DTensor embed(const DTensor& idx) override { return (*embed_)(idx); }

 private:
  LlamaConfig config_;
  std::shared_ptr<Module> embed_;
};

}  // namespace vescale::models
