#include "dmodule/registry.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <mutex>

#include "core/error.h"
#include "dmodule/fqn_glob.h"

namespace vescale {
namespace {

std::mutex& registry_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::map<std::string, ModuleFactory>& registry() {
  static std::map<std::string, ModuleFactory> factories;
  return factories;
}

}  // namespace

double ModuleArgs::number(const std::string& key) const {
  auto it = numbers.find(key);
  VS_CHECK(it != numbers.end(), "[dmodule] module argument '{}' is missing", key);
  return it->second;
}

void register_module_type(const std::string& name, ModuleFactory factory) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry()[name] = std::move(factory);
}

std::shared_ptr<Module> create_module(const std::string& name, const ModuleArgs& args) {
  ModuleFactory factory;
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    auto it = registry().find(name);
    if (it != registry().end()) factory = it->second;
  }
  if (!factory) {
    throw UserError(fmt::format("[dmodule] unknown module type '{}': registered types are {}", name,
                                fmt::join(module_type_names(), ", ")));
  }
  return factory(args);
}

std::vector<std::string> module_type_names() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  std::vector<std::string> names;
  for (const auto& entry : registry())
    names.push_back(entry.first);
  return names;
}

int apply_patches(Module& root, const std::vector<Patch>& patches) {
  int patched = 0;
  for (auto& [fqn, module] : root.named_modules()) {
    const Patch* chosen = nullptr;
    for (const auto& p : patches) {
      if (!p.fqn_pattern.empty() && fqn_matches(p.fqn_pattern, fqn)) chosen = &p;
    }
    if (!chosen) {
      for (const auto& p : patches) {
        if (p.fqn_pattern.empty() && p.module_type == module->type()) chosen = &p;
      }
    }
    if (chosen) {
      module->set_forward_patch(chosen->forward);
      ++patched;
    }
  }
  return patched;
}

}  // namespace vescale
