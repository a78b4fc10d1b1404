// The MLP of docs/design.md §8: fc1 (d_in -> d_hidden), GELU, fc2 (d_hidden -> d_out) for 2 layers;
// layers.{i} for more. Trained on teacher-student regression (MSE).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dmodule/module.h"
#include "family/layered_model.h"

namespace vescale::models {

struct MLPConfig {
  int64_t d_in = 64;
  int64_t d_hidden = 256;
  int64_t d_out = 64;
  int64_t n_layers = 2;
};

class MLP : public Module, public LayeredModel {
 public:
  explicit MLP(const MLPConfig& config);
  const MLPConfig& config() const { return config_; }
  /// FQNs of its linears in forward order: fc1, fc2, or layers.{i}.
  std::vector<std::string> layer_names() const;

  /// Layer i: linear i, followed by GELU except for the last.
  int64_t layer_count() const override { return static_cast<int64_t>(layers_.size()); }
  Tensors run_layers(int64_t first, int64_t end, const Tensors& inputs,
                     const ForwardContext& context) override;

 protected:
  /// inputs: {x [N, d_in]} -> {y [N, d_out]}.
  Tensors forward(const Tensors& inputs) override;

 private:
  MLPConfig config_;
  std::vector<std::shared_ptr<Module>> layers_;
};

}  // namespace vescale::models
