// Config values to and from TOML: a TOML node or a command-line text read as the type a key's
// default has, and a value written back as a TOML literal.
#pragma once

#include <optional>
#include <string>

#include <toml++/toml.h>

#include "core/config_value.h"

namespace vescale {

/// "an integer", "a list of integers ([2, 2])": the type of `v` in an error message.
const char* type_name(const ConfigValue& v);
/// A TOML node as the type of `like`, or nullopt.
std::optional<ConfigValue> from_node(const toml::node& node, const ConfigValue& like);
/// A command-line value as the type of `like`, or nullopt.
std::optional<ConfigValue> from_text(const std::string& text, const ConfigValue& like);
/// `v` as a TOML literal: `4`, `0.0003` (number_text: never float noise), `'adamw'`, `['a', 'b']`.
std::string toml_literal(const ConfigValue& v);

}  // namespace vescale
