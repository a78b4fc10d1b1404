#include "config/toml_value.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <sstream>

namespace vescale {
namespace {

std::string toml_string(const std::string& text) {
  std::ostringstream out;
  out << toml::value<std::string>(text);
  return out.str();
}

}  // namespace

const char* type_name(const ConfigValue& v) {
  switch (v.index()) {
    case 0:
      return "an integer";
    case 1:
      return "a number";
    case 2:
      return "true or false";
    case 3:
      return "a string";
    case 4:
      return "a string or a list of strings";
    default:
      return "a list of integers ([2, 2])";
  }
}

std::optional<ConfigValue> from_node(const toml::node& node, const ConfigValue& like) {
  switch (like.index()) {
    case 0:
      if (auto v = node.value_exact<int64_t>()) return ConfigValue(*v);
      return std::nullopt;
    case 1:
      if (auto v = node.value_exact<double>()) return ConfigValue(*v);
      if (auto v = node.value_exact<int64_t>()) return ConfigValue(static_cast<double>(*v));
      return std::nullopt;
    case 2:
      if (auto v = node.value_exact<bool>()) return ConfigValue(*v);
      return std::nullopt;
    case 3:
      if (auto v = node.value_exact<std::string>()) return ConfigValue(*v);
      return std::nullopt;
    case 5: {
      const toml::array* array = node.as_array();
      if (array == nullptr) return std::nullopt;
      std::vector<int64_t> items;
      for (const toml::node& item : *array) {
        auto v = item.value_exact<int64_t>();
        if (!v) return std::nullopt;
        items.push_back(*v);
      }
      return ConfigValue(items);
    }
    default: {
      if (auto v = node.value_exact<std::string>())
        return ConfigValue(std::vector<std::string>{*v});
      const toml::array* array = node.as_array();
      if (array == nullptr) return std::nullopt;
      std::vector<std::string> items;
      for (const toml::node& item : *array) {
        auto v = item.value_exact<std::string>();
        if (!v) return std::nullopt;
        items.push_back(*v);
      }
      return ConfigValue(items);
    }
  }
}

std::optional<ConfigValue> from_text(const std::string& text, const ConfigValue& like) {
  const bool list = like.index() == 4;
  if (like.index() == 3 || (list && text.rfind('[', 0) != 0)) {
    const bool quoted = text.size() >= 2 && (text.front() == '"' || text.front() == '\'') &&
                        text.back() == text.front();
    std::string value = quoted ? text.substr(1, text.size() - 2) : text;
    if (list) return ConfigValue(std::vector<std::string>{std::move(value)});
    return ConfigValue(std::move(value));
  }
  try {
    auto table = toml::parse("v = " + text);
    if (auto node = table.get("v")) return from_node(*node, like);
  } catch (const toml::parse_error&) {
  }
  return std::nullopt;
}

std::string toml_literal(const ConfigValue& v) {
  switch (v.index()) {
    case 0:
      return std::to_string(std::get<int64_t>(v));
    case 1: {
      std::string text = number_text(std::get<double>(v));
      if (text.find_first_of(".eni") == std::string::npos) text += ".0";  // a TOML float: 3.0
      return text;
    }
    case 2:
      return std::get<bool>(v) ? "true" : "false";
    case 3:
      return toml_string(std::get<std::string>(v));
    case 5:
      return fmt::format("[{}]", fmt::join(std::get<std::vector<int64_t>>(v), ", "));
    default: {
      const auto& items = std::get<std::vector<std::string>>(v);
      if (items.size() == 1) return toml_string(items[0]);
      std::vector<std::string> literals;
      for (const auto& item : items)
        literals.push_back(toml_string(item));
      return fmt::format("[{}]", fmt::join(literals, ", "));
    }
  }
}

}  // namespace vescale
