#include "train/activation_checkpoint.h"

#include <torch/csrc/autograd/grad_mode.h>

#include <memory>
#include <utility>

#include "core/error.h"
#include "dtensor/recompute.h"

namespace vescale {
namespace {

/// For its lifetime, parameters `params` are DTensors over `locals[offset + k]` (aliases a
/// recompute differentiates against, NOTE [Recompute]); then they are themselves again.
class ParameterAliases {
 public:
  ParameterAliases(const std::vector<DTensor*>& params, const std::vector<at::Tensor>& locals,
                   size_t offset)
      : params_(params) {
    for (size_t k = 0; k < params.size(); ++k) {
      saved_.push_back(*params[k]);
      *params[k] = params[k]->with_local(locals.at(offset + k));
    }
  }
  ~ParameterAliases() {
    for (size_t k = 0; k < params_.size(); ++k)
      *params_[k] = std::move(saved_[k]);
  }
  ParameterAliases(const ParameterAliases&) = delete;
  ParameterAliases& operator=(const ParameterAliases&) = delete;

 private:
  const std::vector<DTensor*>& params_;
  std::vector<DTensor> saved_;
};

/// The first run's outputs of a recomputed layer (their specs), taken once.
struct FirstOutputs {
  bool taken = false;
  Tensors outputs;
};

}  // namespace

ActivationCheckpoint::ActivationCheckpoint(const JobConfig& config,
                                           const std::vector<Layer>& layers,
                                           std::vector<std::vector<DTensor*>> layer_params)
    : layer_params_(std::move(layer_params)) {
  VS_CHECK(layer_params_.size() == layers.size(),
           "[recompute] parameters for {} layers, but the model has {}", layer_params_.size(),
           layers.size());
  int64_t block = 0;
  for (const Layer& layer : layers) {
    modes_.push_back(layer.kind == LayerKind::kBlock ? config.recompute_of_block(block++)
                                                     : Recompute::kNone);
  }
}

Tensors ActivationCheckpoint::run_layers(int64_t first, int64_t end, const Tensors& inputs,
                                         const ForwardContext& context,
                                         const LayerRunner& run) const {
  // Nothing is kept for a backward without gradients.
  if (!torch::autograd::GradMode::is_enabled()) return run(first, end, inputs, context);
  Tensors x = inputs;
  for (int64_t i = first; i < end;) {
    if (mode(i) == Recompute::kNone) {
      int64_t j = i + 1;
      while (j < end && mode(j) == Recompute::kNone)
        ++j;
      x = run(i, j, x, context);
      i = j;
      continue;
    }
    if (mode(i) == Recompute::kSelective) {
      RecomputeAttentionScope scope;
      x = run(i, i + 1, x, context);
    } else {
      x = run_recomputed(i, x, context, run);
    }
    ++i;
  }
  return x;
}

Tensors ActivationCheckpoint::run_recomputed(int64_t layer, const Tensors& inputs,
                                             const ForwardContext& context,
                                             const LayerRunner& run) const {
  const std::vector<DTensor*>& params = layer_params_.at(static_cast<size_t>(layer));
  std::vector<at::Tensor> locals;
  for (const DTensor& x : inputs)
    locals.push_back(x.to_local());
  for (const DTensor* p : params)
    locals.push_back(p->to_local());
  auto first = std::make_shared<FirstOutputs>();
  // The layer on DTensors over `l`: the inputs' (placements and all) and the parameters'.
  LocalFunction forward = [run, layer, context, templates = inputs, params,
                           first](const std::vector<at::Tensor>& l) {
    Tensors in;
    for (size_t j = 0; j < templates.size(); ++j)
      in.push_back(templates[j].with_local(l.at(j)));
    Tensors out;
    {
      const ParameterAliases aliases(params, l, templates.size());
      out = run(layer, layer + 1, in, context);
    }
    std::vector<at::Tensor> out_locals;
    for (const DTensor& y : out)
      out_locals.push_back(y.to_local());
    if (!first->taken) {
      first->taken = true;
      first->outputs = std::move(out);
    }
    return out_locals;
  };
  const std::vector<at::Tensor> outputs =
      recompute_in_backward(std::move(forward), std::move(locals), "LayerRecompute");
  // Moved out, so the closure the autograd node keeps holds no output (no cycle through it).
  Tensors result = std::move(first->outputs);
  first->outputs.clear();
  for (size_t j = 0; j < result.size(); ++j)
    result[j] = result[j].with_local(outputs.at(j));
  return result;
}

}  // namespace vescale
