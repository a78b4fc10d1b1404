// The mlp family: its [model] keys, and what the rest of the program asks of the MLP.
#include <fmt/format.h>

#include <algorithm>

#include "family/bound_keys.h"
#include "models/families.h"
#include "models/mlp.h"

namespace vescale::models {
namespace {

const std::vector<BoundKey<MLPConfig>>& mlp_keys() {
  static const std::vector<BoundKey<MLPConfig>> keys = {
      {{"d_in", int64_t{64}, "MLP input size", at_least(1)}, &MLPConfig::d_in},
      {{"d_hidden", int64_t{256}, "MLP hidden size", at_least(1)}, &MLPConfig::d_hidden},
      {{"d_out", int64_t{64}, "MLP output size", at_least(1)}, &MLPConfig::d_out},
      {{"n_layers", int64_t{2}, "MLP linear layers (2: fc1, fc2)", at_least(1)},
       &MLPConfig::n_layers},
  };
  return keys;
}

MLPConfig mlp_config(const ModelSpec& spec) {
  return read_keys(mlp_keys(), spec.keys);
}

class MLPFamily : public ModelFamily {
 public:
  std::string name() const override { return "mlp"; }

  std::vector<FamilyKey> keys() const override { return declared_keys(mlp_keys()); }

  Objective objective() const override { return Objective::kRegression; }
  int64_t activation_dims() const override { return 2; }

  std::shared_ptr<Module> build(const ModelSpec& spec) const override {
    return std::make_shared<MLP>(mlp_config(spec));
  }

  std::vector<Layer> layers(const ModelSpec&, Module& model) const override {
    std::vector<Layer> out;
    for (const auto& fqn : dynamic_cast<MLP&>(model).layer_names())
      out.push_back({fqn, {fqn}, 6.0 * static_cast<double>(parameters_under(model, {fqn}))});
    return out;
  }

  double parameter_count(const ModelSpec& spec) const override {
    const MLPConfig m = mlp_config(spec);
    const auto in = static_cast<double>(m.d_in), h = static_cast<double>(m.d_hidden),
               out = static_cast<double>(m.d_out);
    const double middle = std::max(0.0, static_cast<double>(m.n_layers) - 2.0);
    return in * h + h + middle * (h * h + h) + h * out + out;
  }

  double output_elements_per_sample(const ModelSpec& spec) const override {
    return static_cast<double>(mlp_config(spec).d_out);
  }

  std::vector<std::string> size_keys() const override {
    return {"d_in", "d_hidden", "d_out", "n_layers"};
  }

  /// The first layer's weight is the input layer (embedding), the last's the output layer
  /// (lm_head); the weights between, layers.1 .. layers.{n - 2} (none of 2), are hidden.
  std::vector<ParamRole> param_roles(const ModelSpec& spec, const std::string& fqn) const override {
    if (ends_with(fqn, ".bias")) return {ParamRole::kBias};
    const int64_t n = mlp_config(spec).n_layers;
    const auto weight = [n](int64_t i) {
      return n == 2 ? fmt::format("fc{}.weight", i + 1) : fmt::format("layers.{}.weight", i);
    };
    if (fqn == weight(0)) return {ParamRole::kEmbedding};
    if (fqn == weight(n - 1)) return {ParamRole::kLmHead};
    return {ParamRole::kHidden};
  }

  std::pair<int64_t, int64_t> features(const ModelSpec& spec) const override {
    const MLPConfig m = mlp_config(spec);
    return {m.d_in, m.d_out};
  }
};

}  // namespace

std::shared_ptr<const ModelFamily> mlp_family() {
  return std::make_shared<MLPFamily>();
}

}  // namespace vescale::models
