// Plug-ins: module types registered by name (so a model can be built with a third-party block),
// and forward patches that replace a module's forward by FQN pattern or by type.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dmodule/module.h"

namespace vescale {

/// What a module factory gets: named numbers (sizes, rates) and shared objects.
struct ModuleArgs {
  std::map<std::string, double> numbers;
  std::map<std::string, std::shared_ptr<const void>> objects;

  double number(const std::string& key) const;
  int64_t integer(const std::string& key) const { return static_cast<int64_t>(number(key)); }
  template <typename T>
  std::shared_ptr<const T> object(const std::string& key) const {
    auto it = objects.find(key);
    return it == objects.end() ? nullptr : std::static_pointer_cast<const T>(it->second);
  }
};

using ModuleFactory = std::function<std::shared_ptr<Module>(const ModuleArgs&)>;

/// Registers (or replaces) a module type. Thread-safe.
void register_module_type(const std::string& name, ModuleFactory factory);
/// Builds a registered type; throws UserError naming the known types if `name` is unknown.
std::shared_ptr<Module> create_module(const std::string& name, const ModuleArgs& args);
std::vector<std::string> module_type_names();

/// A replacement forward for the modules whose FQN matches `fqn_pattern` (plan glob syntax) or,
/// when the pattern is empty, whose type is `module_type`.
struct Patch {
  std::string fqn_pattern;
  std::string module_type;
  ForwardFn forward;
};

/// Installs the patches on `root` and its submodules: an FQN match wins over a type match, and a
/// later patch over an earlier one. Returns how many modules were patched.
int apply_patches(Module& root, const std::vector<Patch>& patches);

}  // namespace vescale
