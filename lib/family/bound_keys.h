// A family's [model] keys declared once (issue [27]): each key's name, default, help, range and
// role beside the member of the family's config struct it fills, so the list the schema shows and
// the code that reads the values cannot drift apart.
//
//   const std::vector<BoundKey<GPTConfig>>& gpt_keys() {
//     static const std::vector<BoundKey<GPTConfig>> keys = {
//         {{"n_layer", int64_t{2}, "GPT blocks", at_least(1)}, &GPTConfig::n_layer}, ...};
//     return keys;
//   }
//   keys() -> declared_keys(gpt_keys());  gpt_config(spec) -> read_keys(gpt_keys(), spec.keys)
#pragma once

#include <cstdint>
#include <type_traits>
#include <variant>
#include <vector>

#include "family/model_family.h"

namespace vescale {

template <typename Config>
struct BoundKey {
  FamilyKey key;
  std::variant<int64_t Config::*, double Config::*, bool Config::*> member;
};

/// The keys as the schema lists them.
template <typename Config>
std::vector<FamilyKey> declared_keys(const std::vector<BoundKey<Config>>& keys) {
  std::vector<FamilyKey> out;
  out.reserve(keys.size());
  for (const auto& k : keys)
    out.push_back(k.key);
  return out;
}

/// A Config with every bound member read from `values` (the rest as Config's defaults).
template <typename Config>
Config read_keys(const std::vector<BoundKey<Config>>& keys, const ModelKeys& values) {
  Config config;
  for (const auto& k : keys) {
    const std::string& name = k.key.name;
    std::visit(
        [&](auto member) {
          using T = std::remove_reference_t<decltype(config.*member)>;
          if constexpr (std::is_same_v<T, int64_t>) config.*member = values.integer(name);
          if constexpr (std::is_same_v<T, double>) config.*member = values.number(name);
          if constexpr (std::is_same_v<T, bool>) config.*member = values.boolean(name);
        },
        k.member);
  }
  return config;
}

}  // namespace vescale
