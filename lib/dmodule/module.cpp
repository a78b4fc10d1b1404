#include "dmodule/module.h"

#include <set>

#include "core/error.h"

namespace vescale {

Tensors Module::operator()(const Tensors& inputs) {
  Tensors x = input_hook_ ? input_hook_(inputs) : inputs;
  Tensors y = patch_ ? patch_(*this, x) : forward(x);
  return output_hook_ ? output_hook_(y) : y;
}

std::vector<std::pair<std::string, ParameterPtr>> Module::all_parameter_names() {
  std::vector<std::pair<std::string, ParameterPtr>> out;
  const std::string prefix = fqn_.empty() ? "" : fqn_ + ".";
  for (const auto& [name, p] : params_)
    out.emplace_back(prefix + name, p);
  for (const auto& [name, child] : children_) {
    auto sub = child->all_parameter_names();
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

std::vector<std::pair<std::string, ParameterPtr>> Module::named_parameters() {
  std::vector<std::pair<std::string, ParameterPtr>> out;
  std::set<const Parameter*> seen;
  for (auto& entry : all_parameter_names()) {
    if (seen.insert(entry.second.get()).second) out.push_back(entry);
  }
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out{{fqn_, this}};
  for (const auto& [name, child] : children_) {
    auto sub = child->named_modules();
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

DTensor& Module::param(const std::string& name) {
  return parameter(name)->get();
}

const ParameterPtr& Module::parameter(const std::string& name) const {
  for (const auto& [n, p] : params_) {
    if (n == name) return p;
  }
  throw Error(fmt::format("[dmodule] module '{}' ({}) has no parameter '{}'", fqn_, type_, name));
}

Module& Module::child(const std::string& name) {
  for (auto& [n, c] : children_) {
    if (n == name) return *c;
  }
  throw Error(fmt::format("[dmodule] module '{}' ({}) has no submodule '{}'", fqn_, type_, name));
}

void Module::assign_names(const std::string& prefix) {
  fqn_ = prefix;
  for (auto& [name, child] : children_)
    child->assign_names(prefix.empty() ? name : prefix + "." + name);
}

ParameterPtr Module::register_parameter(const std::string& name, std::vector<int64_t> shape,
                                        ParamInit init) {
  auto p = std::make_shared<Parameter>();
  p->shape = std::move(shape);
  p->init = init;
  params_.emplace_back(name, p);
  return p;
}

void Module::register_tied_parameter(const std::string& name, ParameterPtr param) {
  params_.emplace_back(name, std::move(param));
}

Tensors Container::forward(const Tensors&) {
  throw Error(fmt::format("[dmodule] '{}' is a container: call its submodules", fqn()));
}

}  // namespace vescale
