// Module: the base of models written once with single-device semantics. Every submodule has a
// fully qualified name (FQN, "transformer.h.0.attn") and hook points on its inputs and outputs,
// where parallelize_module installs the plan's resharding; a forward can be patched by FQN
// pattern or module type.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dmodule/parameter.h"
#include "dtensor/dtensor.h"

namespace vescale {

using Tensors = std::vector<DTensor>;

class Module;
/// A replacement forward: gets the module (for its parameters and children) and the inputs.
using ForwardFn = std::function<Tensors(Module& self, const Tensors& inputs)>;
using HookFn = std::function<Tensors(const Tensors&)>;

class Module {
 public:
  explicit Module(std::string type) : type_(std::move(type)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// The module type name ("Linear", "GPT", ...): what patches and the registry key on.
  const std::string& type() const { return type_; }
  /// "" for the root.
  const std::string& fqn() const { return fqn_; }

  /// Runs input hooks, the forward (or its patch), then output hooks. *Collective* when the
  /// module is parallelized.
  Tensors operator()(const Tensors& inputs);
  DTensor operator()(const DTensor& input) { return (*this)(Tensors{input}).at(0); }

  /// Parameters by FQN, each once (a tied parameter under its first name), in registration order.
  std::vector<std::pair<std::string, ParameterPtr>> named_parameters();
  /// Every FQN under which a parameter is reachable, tied names included.
  std::vector<std::pair<std::string, ParameterPtr>> all_parameter_names();
  /// This module and every submodule, by FQN, depth first.
  std::vector<std::pair<std::string, Module*>> named_modules();
  /// The direct parameter `name` (e.g. "weight"); throws naming the module if absent.
  DTensor& param(const std::string& name);
  /// The direct parameter `name` as declared (materialised or not); throws like param().
  const ParameterPtr& parameter(const std::string& name) const;
  Module& child(const std::string& name);

  void set_input_hook(HookFn hook) { input_hook_ = std::move(hook); }
  void set_output_hook(HookFn hook) { output_hook_ = std::move(hook); }
  void set_forward_patch(ForwardFn patch) { patch_ = std::move(patch); }
  bool patched() const { return static_cast<bool>(patch_); }
  /// Whether a hook or a patch changes what calling the module does.
  bool hooked() const { return input_hook_ || output_hook_ || patch_; }

  /// Gives this module and its children their FQNs under `prefix`. Models call it on the root.
  void assign_names(const std::string& prefix = "");

 protected:
  virtual Tensors forward(const Tensors& inputs) = 0;
  ParameterPtr register_parameter(const std::string& name, std::vector<int64_t> shape,
                                  ParamInit init);
  /// Registers an existing parameter under another name (weight tying).
  void register_tied_parameter(const std::string& name, ParameterPtr param);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    children_.emplace_back(name, module);
    return module;
  }

 private:
  std::string type_;
  std::string fqn_;
  std::vector<std::pair<std::string, ParameterPtr>> params_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  HookFn input_hook_, output_hook_;
  ForwardFn patch_;
};

/// A module that only holds submodules ("transformer", "h"): it has no forward of its own.
class Container : public Module {
 public:
  Container() : Module("Container") {}
  template <typename M>
  std::shared_ptr<M> add(const std::string& name, std::shared_ptr<M> module) {
    return register_module(name, std::move(module));
  }

 protected:
  Tensors forward(const Tensors& inputs) override;
};

}  // namespace vescale
