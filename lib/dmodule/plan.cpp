#include "dmodule/plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <toml++/toml.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "build_config.h"
#include "core/error.h"
#include "core/suggest.h"
#include "dmodule/fqn_glob.h"

namespace vescale {
namespace fs = std::filesystem;
namespace {

const std::vector<std::string> kTopKeys = {"model", "description", "parameter", "forward"};

void check_top_key(const std::string& key, const std::string& source) {
  if (std::find(kTopKeys.begin(), kTopKeys.end(), key) != kTopKeys.end()) return;
  const auto near = near_matches(key, kTopKeys, 1);
  throw UserError(fmt::format("plan {}: unknown key '{}'{}; valid keys: {}", source, key,
                              near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near[0]),
                              fmt::join(kTopKeys, ", ")));
}

/// "transformer.h.*.attn.input" -> module "transformer.h.*.attn", input.
PlanForwardRule forward_rule(const std::string& key, const std::string& source, int line) {
  PlanForwardRule rule;
  rule.key = key;
  rule.line = line;
  auto ends_with = [&](const std::string& suffix) {
    return key == suffix || (key.size() > suffix.size() + 1 &&
                             key.compare(key.size() - suffix.size(), suffix.size(), suffix) == 0 &&
                             key[key.size() - suffix.size() - 1] == '.');
  };
  if (ends_with("input")) {
    rule.input = true;
  } else if (ends_with("output")) {
    rule.input = false;
  } else {
    throw UserError(
        fmt::format("plan {}: forward key '{}' must end in .input or .output (e.g. "
                    "'transformer.h.*.attn.input')",
                    source, key));
  }
  const size_t suffix = rule.input ? 5 : 6;
  rule.module = key.size() > suffix ? key.substr(0, key.size() - suffix - 1) : "";
  return rule;
}

std::string where(const std::string& source, int line) {
  return line > 0 ? fmt::format("{}:{}", source, line) : source;
}

}  // namespace

Plan Plan::parse_json(const std::string& text, const std::string& source) {
  nlohmann::ordered_json doc;
  try {
    doc = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw UserError(fmt::format("plan {}: not valid JSON: {}", source, e.what()));
  }
  VS_USER_CHECK(doc.is_object(), "plan {}: the top level must be an object", source);
  Plan plan;
  plan.source = source;
  auto placement_list = [&](const nlohmann::ordered_json& v, const std::string& key) {
    VS_USER_CHECK(v.is_array() && !v.empty(),
                  "plan {}: key '{}' needs a list of placements like [\"S(0)\"]", source, key);
    Placements out;
    for (const auto& item : v) {
      VS_USER_CHECK(item.is_string(),
                    "plan {}: key '{}': placements are strings like \"S(0)\" or \"R\"", source,
                    key);
      out.push_back(
          Placement::parse(item.get<std::string>(), fmt::format("plan {}: key '{}'", source, key)));
    }
    return out;
  };
  for (const auto& [key, value] : doc.items()) {
    check_top_key(key, source);
    if (key == "model" || key == "description") {
      VS_USER_CHECK(value.is_string(), "plan {}: '{}' must be a string", source, key);
      (key == "model" ? plan.model : plan.description) = value.get<std::string>();
    } else if (key == "parameter") {
      VS_USER_CHECK(value.is_object(), "plan {}: 'parameter' must map FQN patterns to placements",
                    source);
      for (const auto& [k, v] : value.items())
        plan.parameter.push_back({k, placement_list(v, k), 0});
    } else {
      VS_USER_CHECK(value.is_object(),
                    "plan {}: 'forward' must map module .input/.output keys to placements", source);
      for (const auto& [k, v] : value.items()) {
        PlanForwardRule rule = forward_rule(k, source, 0);
        VS_USER_CHECK(
            v.is_array() && !v.empty() && v[0].is_array(),
            "plan {}: forward key '{}' needs one placement list per tensor, e.g. [[\"R\"]]", source,
            k);
        for (const auto& per_tensor : v)
          rule.placements.push_back(placement_list(per_tensor, k));
        plan.forward.push_back(rule);
      }
    }
  }
  return plan;
}

Plan Plan::parse_toml(const std::string& text, const std::string& source) {
  toml::table doc;
  try {
    doc = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    throw UserError(fmt::format("plan {}:{}: not valid TOML: {}", source, e.source().begin.line,
                                e.description()));
  }
  Plan plan;
  plan.source = source;
  auto placement_list = [&](const toml::node& v, const std::string& key, int line) {
    const toml::array* list = v.as_array();
    VS_USER_CHECK(list && !list->empty(),
                  "plan {}: key '{}' needs a list of placements like [\"S(0)\"]",
                  where(source, line), key);
    Placements out;
    for (const auto& item : *list) {
      auto str = item.value<std::string>();
      VS_USER_CHECK(str.has_value(), "plan {}: key '{}': placements are strings like \"S(0)\"",
                    where(source, line), key);
      out.push_back(
          Placement::parse(*str, fmt::format("plan {}: key '{}'", where(source, line), key)));
    }
    return out;
  };
  // Tables are unordered in toml++: keep the file's order (later keys override earlier ones).
  auto in_file_order = [](const toml::table& table) {
    std::vector<std::pair<std::string, const toml::node*>> entries;
    for (const auto& [k, v] : table)
      entries.emplace_back(std::string(k.str()), &v);
    std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
      return a.second->source().begin.line < b.second->source().begin.line;
    });
    return entries;
  };
  for (const auto& [key, node] : in_file_order(doc)) {
    check_top_key(key, source);
    const int line = static_cast<int>(node->source().begin.line);
    if (key == "model" || key == "description") {
      auto str = node->value<std::string>();
      VS_USER_CHECK(str.has_value(), "plan {}: '{}' must be a string", where(source, line), key);
      (key == "model" ? plan.model : plan.description) = *str;
      continue;
    }
    const toml::table* table = node->as_table();
    VS_USER_CHECK(table != nullptr, "plan {}: [{}] must be a table", where(source, line), key);
    for (const auto& [k, v] : in_file_order(*table)) {
      const int kline = static_cast<int>(v->source().begin.line);
      if (key == "parameter") {
        plan.parameter.push_back({k, placement_list(*v, k, kline), kline});
      } else {
        PlanForwardRule rule = forward_rule(k, source, kline);
        const toml::array* lists = v->as_array();
        VS_USER_CHECK(
            lists && !lists->empty() && lists->front().is_array(),
            "plan {}: forward key '{}' needs one placement list per tensor, e.g. [[\"R\"]]",
            where(source, kline), k);
        for (const auto& per_tensor : *lists)
          rule.placements.push_back(placement_list(per_tensor, k, kline));
        plan.forward.push_back(rule);
      }
    }
  }
  return plan;
}

std::string plan_zoo_dir() {
  if (const char* dir = std::getenv("VESCALE_PLANS_DIR"); dir && *dir) return dir;
  return VESCALE_PLANS_DIR;
}

std::vector<std::string> plan_zoo_names() {
  std::vector<std::string> names;
  const fs::path root = plan_zoo_dir();
  if (!fs::is_directory(root)) return names;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    const auto ext = entry.path().extension();
    if (!entry.is_regular_file() || (ext != ".json" && ext != ".toml")) continue;
    fs::path rel = fs::relative(entry.path(), root);
    names.push_back(rel.replace_extension().generic_string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

Plan Plan::load(const std::string& name_or_path) {
  fs::path path = name_or_path;
  if (!fs::exists(path)) {
    for (const char* ext : {".json", ".toml"}) {
      const fs::path candidate = fs::path(plan_zoo_dir()) / (name_or_path + ext);
      if (fs::exists(candidate)) {
        path = candidate;
        break;
      }
    }
  }
  if (!fs::exists(path)) {
    const auto near = near_matches(name_or_path, plan_zoo_names());
    throw UserError(
        fmt::format("plan '{}': no such file, and no zoo plan of that name{}; zoo plans: {}",
                    name_or_path, near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near[0]),
                    fmt::join(plan_zoo_names(), ", ")));
  }
  std::ifstream in(path);
  VS_USER_CHECK(in.good(), "plan {}: cannot read the file", path.string());
  std::stringstream text;
  text << in.rdbuf();
  if (path.extension() == ".toml") return parse_toml(text.str(), path.string());
  VS_USER_CHECK(path.extension() == ".json", "plan {}: use a .json or .toml file", path.string());
  return parse_json(text.str(), path.string());
}

}  // namespace vescale
