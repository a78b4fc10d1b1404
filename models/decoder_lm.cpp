#include "models/decoder_lm.h"

#include <optional>

#include "core/error.h"
#include "dtensor/context_parallel.h"
#include "dtensor/ops.h"
#include "family/lm_loss.h"
#include "models/layers.h"

namespace vescale::models {

DecoderLM::DecoderLM(std::string type, int64_t vocab_size, int64_t block_size, int64_t n_layer,
                     int64_t padded_vocab)
    : Module(std::move(type)),
      vocab_size_(vocab_size),
      block_size_(block_size),
      n_layer_(n_layer),
      padded_vocab_(padded_vocab) {}

Tensors DecoderLM::forward(const Tensors& inputs) {
  const at::Tensor targets = inputs.size() < 2 ? at::Tensor() : inputs[1].full_tensor();
  return {run_range(0, layer_count(), inputs.at(0), targets)};
}

Tensors DecoderLM::run_layers(int64_t first, int64_t end, const Tensors& inputs,
                              const ForwardContext& context) {
  return {run_range(first, end, inputs.at(0), context.targets, context.loss_normalizer)};
}

DTensor DecoderLM::run_range(int64_t first, int64_t end, DTensor x, const at::Tensor& targets,
                             double loss_normalizer) {
  VS_CHECK(0 <= first && first < end && end <= layer_count(), "[model] {} layers [{}, {}) of {}",
           type(), first, end, layer_count());
  for (int64_t layer = first; layer < end; ++layer) {
    if (layer == 0) {
      // Under context parallelism x holds this rank's part of each sequence.
      const int64_t t = global_sequence_length(x.size(1));
      VS_USER_CHECK(t <= block_size_, "[model] sequence of {} tokens is longer than block_size {}",
                    t, block_size_);
      x = embed(x);
    } else if (layer <= n_layer_) {
      x = (*blocks_[static_cast<size_t>(layer - 1)])(x);
    } else {
      x = head(x, targets, loss_normalizer);
    }
  }
  return x;
}

DTensor DecoderLM::head(const DTensor& x, const at::Tensor& targets, double loss_normalizer) {
  const DTensor hidden = (*final_norm_)(x);
  const DTensor& w = lm_head_->param("weight");
  std::optional<DTensor> next;
  if (targets.defined()) {
    const DeviceMesh& mesh = hidden.mesh();
    next = distribute_tensor(targets.to(mesh.device()), mesh,
                             Placements(mesh.ndim(), Placement::replicate()));
    // A plan's hooks or patch on the head see its logits: those take the unfused path.
    if (!lm_head_->hooked()) return lm_head_loss(hidden, w, *next, vocab_size_, loss_normalizer);
  }
  DTensor logits = (*lm_head_)(hidden);
  if (padded_vocab_ > vocab_size_)
    logits = ops::add(logits, vocab_mask(w.spec(), vocab_size_, w.dtype()));
  return next ? lm_loss(logits, *next, loss_normalizer) : logits;
}

}  // namespace vescale::models
