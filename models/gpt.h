// GPT-2 (nanoGPT) with q/k/v split into three projections; parameter names per docs/design.md §8.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "dmodule/module.h"
#include "models/decoder_lm.h"
#include "models/layers.h"

namespace vescale::models {

struct GPTConfig {
  int64_t vocab_size = 256;
  int64_t block_size = 64;  ///< longest sequence (wpe rows)
  int64_t n_layer = 2;
  int64_t n_head = 4;
  int64_t n_embd = 64;
  double dropout = 0.0;
  /// The vocabulary is padded to a multiple of vocab_multiple x tp; padded logits are masked.
  int64_t vocab_multiple = 64;
  /// Registered module types of the blocks' attention and MLP (plug-ins may add their own).
  std::string attention_type = "CausalSelfAttention";
  std::string mlp_type = "GPTMLP";
  /// q, k and v as one GEMM (NOTE [Fused projections]).
  bool fused_projections = true;

  int64_t padded_vocab(int64_t tp) const;
};

/// Causal self-attention with separate q, k, v projections and an output projection c_proj.
class CausalSelfAttention : public Module {
 public:
  CausalSelfAttention(int64_t n_embd, int64_t n_head, int64_t n_layer,
                      std::shared_ptr<const DropoutState> dropout, bool fused_projections = true);

 protected:
  Tensors forward(const Tensors& inputs) override;

 private:
  int64_t n_head_;
  bool fused_projections_;
  std::shared_ptr<Linear> q_, k_, v_;
  std::shared_ptr<Module> proj_, drop_;
};

/// The block MLP: c_fc (C -> 4C), GELU, c_proj (4C -> C), dropout.
class GPTMLP : public Module {
 public:
  GPTMLP(int64_t n_embd, int64_t n_layer, std::shared_ptr<const DropoutState> dropout);

 protected:
  Tensors forward(const Tensors& inputs) override;

 private:
  std::shared_ptr<Module> fc_, proj_, drop_;
};

class Block : public Module {
 public:
  Block(const GPTConfig& config, std::shared_ptr<const DropoutState> dropout);

 protected:
  Tensors forward(const Tensors& inputs) override;

 private:
  std::shared_ptr<Module> ln_1_, attn_, mlp_;
  std::shared_ptr<LayerNorm> ln_2_;
};

/// Layers (DecoderLM): 0: the embeddings (wte + wpe, dropout); 1..n_layer: the blocks;
/// n_layer + 1: ln_f and the head tied to wte. forward() keeps dropout as the last run's context
/// left it (a fresh model: training, step 0).
class GPT : public DecoderLM {
 public:
  /// `tp` only sets the vocabulary padding (docs/design.md §8).
  GPT(const GPTConfig& config, int64_t tp = 1);
  const GPTConfig& config() const { return config_; }
  /// The seed of the dropout masks (their counter and rows come with each run's context).
  void set_dropout_seed(uint64_t seed) { dropout_->seed = seed; }

  /// The layers with dropout as `context` says.
  Tensors run_layers(int64_t first, int64_t end, const Tensors& inputs,
                     const ForwardContext& context) override;

 protected:
  DTensor embed(const DTensor& idx) override;

 private:
  GPTConfig config_;
  std::shared_ptr<DropoutState> dropout_;
  std::shared_ptr<Module> wte_, wpe_, drop_;
};

/// Registers the built-in GPT blocks ("CausalSelfAttention", "GPTMLP") as module types.
void register_gpt_modules();

}  // namespace vescale::models
