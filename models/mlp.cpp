#include "models/mlp.h"

#include "core/error.h"
#include "dtensor/ops.h"
#include "models/layers.h"

namespace vescale::models {

MLP::MLP(const MLPConfig& config) : Module("MLP"), config_(config) {
  VS_USER_CHECK(config.n_layers >= 2, "[model] mlp needs n_layers >= 2, got {}", config.n_layers);
  for (int64_t i = 0; i < config.n_layers; ++i) {
    const int64_t in = i == 0 ? config.d_in : config.d_hidden;
    const int64_t out = i + 1 == config.n_layers ? config.d_out : config.d_hidden;
    const std::string name =
        config.n_layers == 2 ? fmt::format("fc{}", i + 1) : fmt::format("layers.{}", i);
    layers_.push_back(register_module(name, std::make_shared<Linear>(in, out, true)));
  }
  assign_names();
}

std::vector<std::string> MLP::layer_names() const {
  std::vector<std::string> names;
  for (const auto& layer : layers_)
    names.push_back(layer->fqn());
  return names;
}

Tensors MLP::forward(const Tensors& inputs) {
  return run_layers(0, layer_count(), inputs, ForwardContext{});
}

Tensors MLP::run_layers(int64_t first, int64_t end, const Tensors& inputs,
                        const ForwardContext& /*context: no dropout*/) {
  VS_CHECK(0 <= first && first < end && end <= layer_count(), "[model] MLP layers [{}, {}) of {}",
           first, end, layer_count());
  DTensor x = inputs.at(0);
  for (int64_t i = first; i < end; ++i) {
    x = (*layers_[static_cast<size_t>(i)])(x);
    if (i + 1 < layer_count()) x = ops::gelu(x);
  }
  return {x};
}

}  // namespace vescale::models
