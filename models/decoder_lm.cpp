#include "models/decoder_lm.h"

#include <algorithm>
#include <optional>
#include <set>

#include "core/error.h"
#include "dmodule/fqn_glob.h"
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
  if (adapter_dropout_) adapter_dropout_->follow(context);
  return {run_range(first, end, inputs.at(0), context.targets, context.loss_normalizer)};
}

void DecoderLM::add_adapters(
    const ModelSpec& spec,
    const std::vector<std::pair<std::string, std::vector<std::string>>>& roles) {
  const LoraSpec& lora = spec.lora;
  VS_CHECK(lora.on() && !adapter_dropout_, "[model] {}: adapters are added once", type());
  adapter_dropout_ = std::make_shared<DropoutState>();
  adapter_dropout_->p = lora.dropout;
  adapter_dropout_->seed = spec.seed;
  std::vector<int64_t> layers = lora.layers;
  if (layers.empty()) {
    for (int64_t i = 0; i < n_layer_; ++i)
      layers.push_back(i);
  }
  std::set<std::string> targets;  // the Linears' names under a block ('*': any one segment)
  for (const auto& [role, modules] : roles) {
    if (std::find(lora.targets.begin(), lora.targets.end(), role) != lora.targets.end())
      targets.insert(modules.begin(), modules.end());
  }
  for (const int64_t layer : layers) {
    Module& block = *blocks_.at(static_cast<size_t>(layer));
    std::set<std::string> found;
    for (const auto& [fqn, module] : block.named_modules()) {
      const std::string name = fqn.substr(std::min(fqn.size(), block.fqn().size() + 1));
      const auto target = std::find_if(targets.begin(), targets.end(),
                                       [&](const std::string& t) { return fqn_matches(t, name); });
      if (target == targets.end()) continue;
      auto* linear = dynamic_cast<Linear*>(module);
      VS_CHECK(linear, "[model] {} is not a Linear", fqn);
      const ParameterPtr weight = linear->parameter("weight");
      // peft's adapters of expert parameters refuse dropout too (its ParamWrapper): the
      // projection is one per expert of a stacked tensor, with no input of its own to drop.
      VS_USER_CHECK(!weight->expert || lora.dropout == 0.0,
                    "[lora] lora.dropout = {} with an expert's projection in lora.targets ({}): "
                    "experts' adapters take no dropout (as peft's); set lora.dropout = 0 or "
                    "leave w1, w2, w3 and experts out of lora.targets",
                    lora.dropout, fqn);
      const std::vector<int64_t>& shape = weight->shape;
      const int64_t side = std::min(shape[0], shape[1]);
      VS_USER_CHECK(lora.rank <= side,
                    "[lora] lora.rank = {} is more than {}'s smaller side, {} (its weight is [{}, "
                    "{}]): use a rank of at most {}",
                    lora.rank, fqn, side, shape[0], shape[1], side);
      linear->add_adapter(lora.rank, lora.scaling(), adapter_dropout_);
      found.insert(*target);
    }
    for (const std::string& name : targets) {
      VS_USER_CHECK(found.count(name),
                    "[lora] block {} ({}) has no Linear {} for lora.targets (a block of another "
                    "attention or MLP type?)",
                    layer, block.fqn(), name);
    }
  }
  for (const auto& [fqn, p] : named_parameters())
    p->trainable = p->adapter.has_value();
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
