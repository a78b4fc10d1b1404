// The decoder family's model (Hugging Face's LlamaForCausalLM and MixtralForCausalLM): RMSNorm,
// rotary position embeddings, grouped-query attention and no biases, each layer's MLP of one
// kind: a SwiGLU (Llama) or a sparse mixture of SwiGLU experts (Mixtral, models/moe.h). Its
// variants (models/decoder_variants.h) are rows of data; parameter names are Hugging Face's
// (docs/design.md §8).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dmodule/module.h"
#include "models/decoder_lm.h"
#include "models/layers.h"

namespace vescale::models {

/// The MLP of every decoder layer.
enum class DecoderMlp {
  kSwiGLU,   ///< down_proj(silu(gate_proj(x)) * up_proj(x)) under "mlp"
  kExperts,  ///< a router and SwiGLU experts under "block_sparse_moe" (models/moe.h)
};

struct DecoderConfig {
  int64_t vocab_size = 256;
  int64_t block_size = 64;  ///< longest sequence (max_position_embeddings)
  int64_t n_layer = 2;
  int64_t n_head = 4;
  int64_t n_kv_head = 4;  ///< key/value heads; divides n_head (grouped-query attention)
  int64_t n_embd = 64;
  int64_t intermediate_size = 172;  ///< the SwiGLU's inner size (each expert's)
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-5;
  bool tie_embeddings = false;
  /// The vocabulary is padded to a multiple of vocab_multiple x tp; padded logits are masked.
  int64_t vocab_multiple = 64;
  /// q, k and v, and gate and up, as one GEMM each (NOTE [Fused projections]).
  bool fused_projections = true;

  DecoderMlp mlp = DecoderMlp::kSwiGLU;
  /// kExperts: each layer's experts, the top-k each token goes to, the auxiliary loss's weight in
  /// the objective, and one more expert every token goes through (DeepSeek's shared expert).
  int64_t num_experts = 4;
  int64_t experts_per_token = 2;
  double router_aux_loss_coef = 0.02;
  bool shared_expert = false;

  int64_t padded_vocab(int64_t tp) const;
  /// Key/value heads' width: n_kv_head x the head size.
  int64_t kv_width() const { return n_kv_head * (n_embd / n_head); }
};

/// The module types of a variant: the model's ("Llama") and its layers' ("LlamaDecoderLayer").
struct DecoderTypes {
  std::string model, layer;
};

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
class DecoderAttention : public Module {
 public:
  explicit DecoderAttention(const DecoderConfig& config);

 protected:
  Tensors forward(const Tensors& inputs) override;

 private:
  int64_t n_head_, n_kv_head_, head_dim_;
  double rope_theta_;
  bool fused_projections_;
  std::shared_ptr<Linear> q_, k_, v_, o_;
};

/// down_proj(silu(gate_proj(x)) * up_proj(x)), each of inner size intermediate_size.
class SwiGLU : public Module {
 public:
  explicit SwiGLU(const DecoderConfig& config);

 protected:
  Tensors forward(const Tensors& inputs) override;

 private:
  bool fused_projections_;
  std::shared_ptr<Linear> gate_, up_, down_;
};

/// One decoder layer: x + attn(norm(x)), then that + mlp(norm(that)).
class DecoderLayer : public Module {
 public:
  /// `mlp` registered as `mlp_name` ("mlp", "block_sparse_moe"); `type` the layer's module type.
  DecoderLayer(const DecoderConfig& config, const std::string& type, const std::string& mlp_name,
               std::shared_ptr<Module> mlp);

 protected:
  Tensors forward(const Tensors& inputs) override;

 private:
  std::shared_ptr<Module> input_norm_, attn_, mlp_;
  std::shared_ptr<RMSNorm> post_norm_;
};

class RouterLog;  // models/moe.h

/// Layers (DecoderLM): 0: the token embedding; 1..n_layer: the decoder layers (self_attn, the
/// MLP, input_layernorm, post_attention_layernorm); n_layer + 1: the final norm and lm_head (tied
/// to the embedding or its own). No dropout.
class Decoder : public DecoderLM {
 public:
  /// `tp` only sets the vocabulary padding.
  Decoder(const DecoderConfig& config, const DecoderTypes& types, int64_t tp = 1);
  const DecoderConfig& config() const { return config_; }
  Tensors run_layers(int64_t first, int64_t end, const Tensors& inputs,
                     const ForwardContext& context) override;
  /// What the routers measured in step `step` (kExperts; nullopt for a dense MLP).
  std::optional<RouterStats> router_stats(int64_t step) const override;

 protected:
  DTensor embed(const DTensor& idx) override { return (*embed_)(idx); }

 private:
  /// Decoder layer `i`: the attention and norms around the config's MLP.
  std::shared_ptr<Module> layer(int64_t i, const std::string& type);

  DecoderConfig config_;
  std::shared_ptr<Module> embed_;
  /// kExperts: what the MoE layers share (their forward context and the routers' measures).
  std::shared_ptr<RouterLog> router_log_;
};

}  // namespace vescale::models
