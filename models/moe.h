// The decoder's mixture-of-experts MLP (DecoderMlp::kExperts: Hugging Face's MixtralSparseMoeBlock,
// issue [28]), each layer's MLP a sparse mixture of SwiGLU experts: a float32 router
// picks each token's top-k experts, their outputs are summed with the renormalised router
// weights, nothing dropped; optionally one shared expert every token goes through (DeepSeek).
// The router's auxiliary load-balancing loss joins the training objective (NOTE [MoE auxiliary
// loss]). Each expert's weights are its own parameters under Hugging Face's names; expert
// parallelism holds each on one ep rank (NOTE [Expert parallelism]).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "dmodule/module.h"
#include "dtensor/expert_ops.h"
#include "family/layered_model.h"
#include "models/decoder.h"

namespace vescale::models {

/// What the MoE layers of one model share: the forward context of the current layer run, and
/// what the routers measured in each step's training forwards (keyed by micro-batch and layer,
/// so that a recomputed forward overwrites its first run instead of counting twice).
class RouterLog {
 public:
  RouterLog(int64_t layers, int64_t experts);
  void set_context(const ForwardContext& context) { context_ = context; }
  const ForwardContext& context() const { return context_; }
  /// Layer `layer`'s aux loss and load [experts] of the current micro-batch of a training step.
  void record(int64_t layer, const at::Tensor& aux_loss, const at::Tensor& load);
  /// The sums over the micro-batches and layers recorded for step `step` (zeros if none).
  RouterStats stats(int64_t step) const;

 private:
  int64_t layers_, experts_;
  ForwardContext context_;
  int64_t step_ = -1;
  std::map<std::pair<int64_t, int64_t>, std::pair<at::Tensor, at::Tensor>> entries_;
};

/// One expert (Hugging Face's MixtralBlockSparseTop2MLP): Linears w1 and w3 [I, C], w2 [C, I].
/// Its forward is the MoE layer's: the experts are run on their routed rows by moe_experts.
class MixtralExpert : public Module {
 public:
  MixtralExpert(const DecoderConfig& config, ExpertSlot slot);
  /// Its weights, when this rank holds it (under expert parallelism an ep rank holds its block).
  std::optional<ExpertParams> weights();

 protected:
  Tensors forward(const Tensors& inputs) override;
};

/// A layer's experts 0..E-1, each a MixtralExpert. inputs {x [N, C], router probabilities
/// [N, E]} -> {the top-k experts' outputs, weighted, summed [N, C]} (dropless), the rows of the
/// experts of other ep ranks sent there and back (NOTE [Expert parallelism]).
class MixtralExperts : public Module {
 public:
  MixtralExperts(const DecoderConfig& config, std::shared_ptr<RouterLog> log);

 protected:
  Tensors forward(const Tensors& inputs) override;

 private:
  int64_t top_k_;
  std::shared_ptr<RouterLog> log_;
  std::vector<std::shared_ptr<MixtralExpert>> experts_;
};

/// gate (the router, [E, C]), experts.{e}.{w1, w3} [I, C] and experts.{e}.w2 [C, I], and with
/// shared_expert a SwiGLU shared_expert.{gate_proj, up_proj, down_proj}.
class MixtralSparseMoe : public Module {
 public:
  MixtralSparseMoe(const DecoderConfig& config, int64_t layer, std::shared_ptr<RouterLog> log);

 protected:
  Tensors forward(const Tensors& inputs) override;

 private:
  int64_t layer_, n_layer_, top_k_;
  double router_aux_loss_coef_;
  std::shared_ptr<RouterLog> log_;
  std::shared_ptr<Module> gate_, experts_, shared_;
};

}  // namespace vescale::models
