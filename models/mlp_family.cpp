// The mlp family: its [model] keys, and what the rest of the program asks of the MLP.
#include <algorithm>

#include "models/families.h"
#include "models/mlp.h"

namespace vescale::models {
namespace {

class MLPFamily : public ModelFamily {
 public:
  std::string name() const override { return "mlp"; }

  std::vector<FamilyKey> keys() const override {
    return {
        {"d_in", int64_t{64}, "MLP input size", at_least(1)},
        {"d_hidden", int64_t{256}, "MLP hidden size", at_least(1)},
        {"d_out", int64_t{64}, "MLP output size", at_least(1)},
        {"n_layers", int64_t{2}, "MLP linear layers (2: fc1, fc2)", at_least(1)},
    };
  }

  Objective objective() const override { return Objective::kRegression; }
  int64_t activation_dims() const override { return 2; }

  std::shared_ptr<Module> build(const ModelSpec& spec) const override {
    const ModelKeys& k = spec.keys;
    return std::make_shared<MLP>(MLPConfig{k.integer("d_in"), k.integer("d_hidden"),
                                           k.integer("d_out"), k.integer("n_layers")});
  }

  std::vector<Layer> layers(const ModelSpec&, Module& model) const override {
    std::vector<Layer> out;
    for (const auto& fqn : dynamic_cast<MLP&>(model).layer_names())
      out.push_back({fqn, {fqn}, 6.0 * static_cast<double>(parameters_under(model, {fqn}))});
    return out;
  }

  double parameter_count(const ModelSpec& spec) const override {
    const ModelKeys& k = spec.keys;
    const double in = k.number("d_in"), h = k.number("d_hidden"), out = k.number("d_out");
    const double middle = std::max(0.0, k.number("n_layers") - 2.0);
    return in * h + h + middle * (h * h + h) + h * out + out;
  }

  double output_elements_per_sample(const ModelSpec& spec) const override {
    return spec.keys.number("d_out");
  }

  std::vector<std::string> size_keys() const override {
    return {"d_in", "d_hidden", "d_out", "n_layers"};
  }

  std::pair<int64_t, int64_t> features(const ModelSpec& spec) const override {
    return {spec.keys.integer("d_in"), spec.keys.integer("d_out")};
  }
};

}  // namespace

std::shared_ptr<const ModelFamily> mlp_family() {
  return std::make_shared<MLPFamily>();
}

}  // namespace vescale::models
