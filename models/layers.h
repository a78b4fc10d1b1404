// The building blocks of the built-in models: Linear, LayerNorm, Embedding, Dropout.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include "dmodule/module.h"
#include "dtensor/ops.h"
#include "dtensor/random.h"
#include "family/layered_model.h"

namespace vescale::models {

struct DropoutState;

/// y = x W^T + b, W [out, in] ~ N(0, init_std), b = 0; with a low-rank adapter (NOTE [LoRA])
/// plus alpha / r · dropout(x) A^T B^T.
class Linear : public Module {
 public:
  Linear(int64_t in, int64_t out, bool bias, double init_std = 0.02);
  bool has_bias() const { return bias_; }

  /// Adds an adapter of rank `rank` scaled by `scaling`: lora_A.weight [rank, in] ~ U(±1 /
  /// sqrt(in)) (peft's Kaiming-uniform), lora_B.weight [out, rank] = 0, so that the model's
  /// function is unchanged until B trains. Its dropout masks come from `dropout` (p, step, rows).
  /// An expert's weight passes its ExpertSlot on to the factors.
  void add_adapter(int64_t rank, double scaling, std::shared_ptr<const DropoutState> dropout);
  bool adapted() const { return adapter_dropout_ != nullptr; }
  double adapter_scaling() const { return adapter_scaling_; }
  /// The adapter's term scaling · dropout(x) A^T B^T, for the input x of this Linear.
  DTensor adapter_term(const DTensor& x);

 protected:
  Tensors forward(const Tensors& inputs) override;

 private:
  bool bias_;
  double adapter_scaling_ = 0;
  std::shared_ptr<const DropoutState> adapter_dropout_;
};

/// Each of `projections` (Linears of one input size) applied to x, in order: as one GEMM over
/// their weights side by side when `fused` and they can share one (NOTE [Fused projections]),
/// else one call each. The same values either way, up to the GEMM's rounding.
std::vector<DTensor> project(const DTensor& x, const std::vector<Linear*>& projections, bool fused);

/// A Linear without bias whose weight is another module's (a head tied to its embedding).
class TiedLinear : public Module {
 public:
  explicit TiedLinear(ParameterPtr weight);

 protected:
  Tensors forward(const Tensors& inputs) override;
};

/// `vocab` rounded up to a multiple of multiple x tp (vocab-parallel embeddings split evenly).
int64_t padded_vocab(int64_t vocab, int64_t multiple, int64_t tp);
/// The logits' mask of a padded vocabulary: 0 for real entries, -inf for padding; [V_padded],
/// sharded like the rows of the embedding whose spec is `embedding`.
DTensor vocab_mask(const DTensorSpec& embedding, int64_t vocab, at::ScalarType dtype);

/// Layer norm over the last dim (weight 1, bias 0).
class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5);

  /// (x + delta, this norm of the sum): the residual add before this norm done with it
  /// (ops::add_layer_norm; NOTE [Residual add and norm]). Runs no hook of this module.
  std::pair<DTensor, DTensor> after_add(const DTensor& x, const DTensor& delta);

 protected:
  Tensors forward(const Tensors& inputs) override;

 private:
  double eps_;
};

// NOTE [Residual add and norm]
// A block's residual add and the norm right after it (GPT's ln_2, Llama's post-attention norm)
// are one op, ops::add_layer_norm or ops::add_rms_norm: the kernel table's residual add + norm
// row (NOTE [Kernel table]), with the values and the communication of ops::add and then the norm
// module (the explicit row makes the same ATen calls, bit for bit). A norm module with a hook or
// a patch (a user plan's placements, a recompute) is called as a module after ops::add instead,
// so that what the hook does still happens.
template <typename Norm>
std::pair<DTensor, DTensor> add_then_norm(Norm& norm, const DTensor& x, const DTensor& delta) {
  if (norm.hooked()) {
    DTensor sum = ops::add(x, delta);
    DTensor normed = norm(sum);
    return {sum, normed};
  }
  return norm.after_add(x, delta);
}

/// Rows of W [num, dim] ~ N(0, 0.02) at integer ids.
class Embedding : public Module {
 public:
  Embedding(int64_t num, int64_t dim);

 protected:
  Tensors forward(const Tensors& inputs) override;
};

/// Where dropout masks come from: a job seed and a counter the trainer advances every
/// micro-batch, so that every layout draws the same masks.
struct DropoutState {
  double p = 0.0;
  bool training = true;
  uint64_t seed = 0;
  uint64_t counter = 0;
  /// The rows this rank's activations are of the whole batch (data parallel, micro-batches).
  int64_t row_offset = 0;
  int64_t global_rows = -1;
  /// The mask key of the dropout site `fqn` for the current counter.
  RngKey key(const std::string& fqn) const;
  /// Takes a run's training flag, step (the counter) and rows from its context.
  void follow(const ForwardContext& context);
};

/// Inverted dropout with layout-free masks.
class Dropout : public Module {
 public:
  explicit Dropout(std::shared_ptr<const DropoutState> state);

 protected:
  Tensors forward(const Tensors& inputs) override;

 private:
  std::shared_ptr<const DropoutState> state_;
};

}  // namespace vescale::models
