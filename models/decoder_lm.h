// DecoderLM: what GPT and Llama share. A decoder-only language model as the ordered layers the
// trainer runs: layer 0 embeds token ids, layers 1..n_layer are the blocks, layer n_layer + 1 is
// the head (the final norm and the projection to the padded vocabulary, its padding masked). A
// family brings its embeddings, blocks, final norm and head projection.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dmodule/module.h"
#include "family/layered_model.h"
#include "family/model_family.h"

namespace vescale::models {

struct DropoutState;

class DecoderLM : public Module, public LayeredModel {
 public:
  int64_t padded_vocab() const { return padded_vocab_; }
  int64_t layer_count() const override { return n_layer_ + 2; }
  /// Layers [first, end) under `context`.
  Tensors run_layers(int64_t first, int64_t end, const Tensors& inputs,
                     const ForwardContext& context) override;
  /// Adds the adapters spec.lora asks for (NOTE [LoRA]) to the projections of its targets,
  /// `roles` naming each role's Linears under a block, their dropout masks seeded by spec.seed,
  /// and freezes every other parameter. Throws UserError naming lora.rank when it is more than
  /// a projection's smaller side.
  void add_adapters(const ModelSpec& spec,
                    const std::vector<std::pair<std::string, std::vector<std::string>>>& roles);

 protected:
  /// `type`: the module type ("GPT"); `padded_vocab`: rows of the head, at least `vocab_size`.
  DecoderLM(std::string type, int64_t vocab_size, int64_t block_size, int64_t n_layer,
            int64_t padded_vocab);

  /// inputs: {idx [B, T]} -> {logits [B, T, V_padded]}; {idx, targets [B, T]} -> {loss}. Layers
  /// run with ForwardContext::targets end in the loss too: the head's and the cross entropy's
  /// kernel fused (NOTE [Fused LM loss]) unless the plan hooks or patches the head.
  Tensors forward(const Tensors& inputs) override;
  /// Token ids [B, T] -> x [B, T, C] (layer 0).
  virtual DTensor embed(const DTensor& idx) = 0;

  /// Set by the family's constructor: its blocks, final norm and head projection (x -> logits
  /// [B, T, V_padded], a "weight" of [V_padded, C]).
  std::vector<std::shared_ptr<Module>> blocks_;
  std::shared_ptr<Module> final_norm_, lm_head_;
  /// The adapters' dropout (p, and each run's step and rows).
  std::shared_ptr<DropoutState> adapter_dropout_;

 private:
  DTensor run_range(int64_t first, int64_t end, DTensor x, const at::Tensor& targets,
                    double loss_normalizer = 0);
  /// The final norm and the head: logits, or with `targets` (Replicate [B, T]) the mean loss.
  DTensor head(const DTensor& x, const at::Tensor& targets, double loss_normalizer);

  int64_t vocab_size_, block_size_, n_layer_, padded_vocab_;
};

}  // namespace vescale::models
