#include "family/model_family.h"

#include "family/hf_layout.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <c10/util/accumulate.h>

#include <algorithm>

#include "core/error.h"
#include "core/suggest.h"

namespace vescale {

void ModelKeys::set(const std::string& name, ConfigValue value) {
  values_[name] = std::move(value);
}

const ConfigValue& ModelKeys::at(const std::string& name) const {
  auto it = values_.find(name);
  VS_CHECK(it != values_.end(), "[model] no key model.{}", name);
  return it->second;
}

int64_t ModelKeys::integer(const std::string& name) const {
  const auto* v = std::get_if<int64_t>(&at(name));
  VS_CHECK(v != nullptr, "[model] model.{} is not an integer", name);
  return *v;
}

double ModelKeys::number(const std::string& name) const {
  const ConfigValue& value = at(name);
  if (const auto* i = std::get_if<int64_t>(&value)) return static_cast<double>(*i);
  const auto* d = std::get_if<double>(&value);
  VS_CHECK(d != nullptr, "[model] model.{} is not a number", name);
  return *d;
}

bool ModelKeys::boolean(const std::string& name) const {
  const auto* b = std::get_if<bool>(&at(name));
  VS_CHECK(b != nullptr, "[model] model.{} is not true or false", name);
  return *b;
}

void ModelFamily::check(const ModelSpec&) const {}

int64_t ModelFamily::vocab_size(const ModelSpec&) const {
  VS_CHECK(false, "[model] the {} family has no vocabulary", name());
  return 0;
}

std::pair<int64_t, int64_t> ModelFamily::features(const ModelSpec&) const {
  VS_CHECK(false, "[model] the {} family has no feature sizes", name());
  return {0, 0};
}

std::optional<TransformerShape> ModelFamily::transformer_shape(const ModelSpec&) const {
  return std::nullopt;
}

int64_t ModelFamily::experts_per_layer(const ModelSpec& spec) const {
  const std::optional<TransformerShape> shape = transformer_shape(spec);
  return shape ? shape->experts : 0;
}

std::optional<HFLayout> ModelFamily::hf_layout(const ModelSpec&) const {
  return std::nullopt;
}

const ModelFamily& model_family(const std::string& name) {
  for (const auto& family : model_families())
    if (family->name() == name) return *family;
  const std::vector<std::string> names = model_family_names();
  throw UserError(fmt::format("[model] no model family '{}'{}; the families are {}", name,
                              did_you_mean(name, names), fmt::join(names, ", ")));
}

std::vector<std::string> model_family_names() {
  std::vector<std::string> names;
  for (const auto& family : model_families())
    names.push_back(family->name());
  return names;
}

bool under_modules(const std::string& fqn, const std::vector<std::string>& modules) {
  return std::any_of(modules.begin(), modules.end(),
                     [&](const std::string& m) { return fqn.rfind(m + ".", 0) == 0; });
}

int64_t parameters_under(Module& model, const std::vector<std::string>& modules) {
  int64_t total = 0;
  for (const auto& [fqn, param] : model.named_parameters())
    if (under_modules(fqn, modules)) total += c10::multiply_integers(param->shape);
  return total;
}

std::string describe_keys(const ModelSpec& spec, const std::vector<std::string>& keys) {
  std::vector<std::string> parts;
  for (const auto& k : keys) {
    const ConfigValue& v = spec.keys.at(k);
    const std::string text = std::holds_alternative<int64_t>(v)
                                 ? std::to_string(std::get<int64_t>(v))
                                 : fmt::format("{}", spec.keys.number(k));
    parts.push_back(fmt::format("model.{} = {}", k, text));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

const EnumNames<ParamRole>& param_role_names() {
  static const EnumNames<ParamRole> names("[optimizer] parameter role",
                                          {{ParamRole::kEmbedding, "embedding"},
                                           {ParamRole::kLmHead, "lm_head"},
                                           {ParamRole::kNorm, "norm"},
                                           {ParamRole::kBias, "bias"},
                                           {ParamRole::kRouter, "router"},
                                           {ParamRole::kHidden, "hidden"}});
  return names;
}

}  // namespace vescale
