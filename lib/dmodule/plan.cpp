#include "dmodule/plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <toml++/toml.h>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "build_config.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/suggest.h"
#include "dmodule/fqn_glob.h"

namespace vescale {
namespace fs = std::filesystem;
namespace {

const std::vector<std::string> kTopKeys = {"model", "description", "parameter", "forward"};

void check_top_key(const std::string& key, const std::string& source) {
  if (std::find(kTopKeys.begin(), kTopKeys.end(), key) != kTopKeys.end()) return;
  throw UserError(fmt::format("plan {}: unknown key '{}'{}; valid keys: {}", source, key,
                              did_you_mean(key, kTopKeys), fmt::join(kTopKeys, ", ")));
}

/// A plan in either syntax as one tree: a string, a list or a table (entries in file order), with
/// the line it starts on where the syntax tells (TOML; 0 for JSON).
struct PlanNode {
  enum class Kind { kString, kList, kTable, kOther };
  Kind kind = Kind::kOther;
  int line = 0;
  std::string text;
  std::vector<PlanNode> items;
  std::vector<std::pair<std::string, PlanNode>> entries;
};

/// How errors word what differs between the syntaxes.
struct PlanSyntax {
  const char* parameter_not_table;
  const char* forward_not_table;
  const char* placement_examples;
};

const PlanSyntax kJsonSyntax = {"'parameter' must map FQN patterns to placements",
                                "'forward' must map module .input/.output keys to placements",
                                "\"S(0)\" or \"R\""};
const PlanSyntax kTomlSyntax = {"[parameter] must be a table", "[forward] must be a table",
                                "\"S(0)\""};

PlanNode from_json(const nlohmann::ordered_json& value) {
  PlanNode node;
  if (value.is_string()) {
    node.kind = PlanNode::Kind::kString;
    node.text = value.get<std::string>();
  } else if (value.is_array()) {
    node.kind = PlanNode::Kind::kList;
    for (const auto& item : value)
      node.items.push_back(from_json(item));
  } else if (value.is_object()) {
    node.kind = PlanNode::Kind::kTable;
    for (const auto& [k, v] : value.items())
      node.entries.emplace_back(k, from_json(v));
  }
  return node;
}

PlanNode from_toml(const toml::node& value) {
  PlanNode node;
  node.line = static_cast<int>(value.source().begin.line);
  if (auto str = value.value<std::string>()) {
    node.kind = PlanNode::Kind::kString;
    node.text = *str;
  } else if (const toml::array* list = value.as_array()) {
    node.kind = PlanNode::Kind::kList;
    for (const auto& item : *list)
      node.items.push_back(from_toml(item));
  } else if (const toml::table* table = value.as_table()) {
    node.kind = PlanNode::Kind::kTable;
    // Tables are unordered in toml++: keep the file's order (later keys override earlier ones).
    std::vector<std::pair<std::string, const toml::node*>> entries;
    for (const auto& [k, v] : *table)
      entries.emplace_back(std::string(k.str()), &v);
    std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
      return a.second->source().begin.line < b.second->source().begin.line;
    });
    for (const auto& [k, v] : entries)
      node.entries.emplace_back(k, from_toml(*v));
  }
  return node;
}

/// ["S(0)", "R"]: the placements of `key`, whose line is `line`.
Placements placement_list(const PlanNode& value, const std::string& key, int line,
                          const std::string& source, const PlanSyntax& syntax) {
  const std::string at = plan_location(source, line);
  VS_USER_CHECK(value.kind == PlanNode::Kind::kList && !value.items.empty(),
                "plan {}: key '{}' needs a list of placements like [\"S(0)\"]", at, key);
  Placements out;
  for (const auto& item : value.items) {
    VS_USER_CHECK(item.kind == PlanNode::Kind::kString,
                  "plan {}: key '{}': placements are strings like {}", at, key,
                  syntax.placement_examples);
    out.push_back(Placement::parse(item.text, fmt::format("plan {}: key '{}'", at, key)));
  }
  return out;
}

/// "transformer.h.*.attn.input" -> module "transformer.h.*.attn", input.
PlanForwardRule forward_rule_target(const std::string& key, const std::string& source, int line) {
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

/// "fc1.input" = [["R"]]: one placement list per tensor.
PlanForwardRule forward_rule(const std::string& key, const PlanNode& value,
                             const std::string& source, const PlanSyntax& syntax) {
  PlanForwardRule rule = forward_rule_target(key, source, value.line);
  VS_USER_CHECK(value.kind == PlanNode::Kind::kList && !value.items.empty() &&
                    value.items.front().kind == PlanNode::Kind::kList,
                "plan {}: forward key '{}' needs one placement list per tensor, e.g. [[\"R\"]]",
                plan_location(source, value.line), key);
  for (const auto& per_tensor : value.items)
    rule.placements.push_back(placement_list(per_tensor, key, value.line, source, syntax));
  return rule;
}

/// The plan a document of either syntax describes.
Plan plan_from_tree(const PlanNode& doc, const std::string& source, const PlanSyntax& syntax) {
  Plan plan;
  plan.source = source;
  for (const auto& [key, node] : doc.entries) {
    check_top_key(key, source);
    if (key == "model" || key == "description") {
      VS_USER_CHECK(node.kind == PlanNode::Kind::kString, "plan {}: '{}' must be a string",
                    plan_location(source, node.line), key);
      (key == "model" ? plan.model : plan.description) = node.text;
      continue;
    }
    const bool parameter = key == "parameter";
    VS_USER_CHECK(node.kind == PlanNode::Kind::kTable, "plan {}: {}",
                  plan_location(source, node.line),
                  parameter ? syntax.parameter_not_table : syntax.forward_not_table);
    for (const auto& [k, v] : node.entries) {
      if (parameter) {
        plan.parameter.push_back({k, placement_list(v, k, v.line, source, syntax), v.line});
      } else {
        plan.forward.push_back(forward_rule(k, v, source, syntax));
      }
    }
  }
  return plan;
}

}  // namespace

Plan Plan::parse_json(const std::string& text, const std::string& source) {
  nlohmann::ordered_json doc;
  // JSON lets a key repeat and keeps one of its values silently: a plan names each key once.
  std::vector<std::set<std::string>> open_objects;
  auto refuse_duplicates = [&](int, nlohmann::ordered_json::parse_event_t event,
                               nlohmann::ordered_json& parsed) {
    using Event = nlohmann::ordered_json::parse_event_t;
    if (event == Event::object_start) open_objects.emplace_back();
    if (event == Event::object_end && !open_objects.empty()) open_objects.pop_back();
    if (event == Event::key && !open_objects.empty()) {
      const std::string key = parsed.get<std::string>();
      VS_USER_CHECK(open_objects.back().insert(key).second,
                    "plan {}: key '{}' appears twice in one object", source, key);
    }
    return true;
  };
  try {
    doc = nlohmann::ordered_json::parse(text, refuse_duplicates);
  } catch (const nlohmann::json::parse_error& e) {
    throw UserError(fmt::format("plan {}: not valid JSON: {}", source, e.what()));
  }
  VS_USER_CHECK(doc.is_object(), "plan {}: the top level must be an object", source);
  return plan_from_tree(from_json(doc), source, kJsonSyntax);
}

Plan Plan::parse_toml(const std::string& text, const std::string& source) {
  toml::table doc;
  try {
    doc = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    throw UserError(fmt::format("plan {}:{}: not valid TOML: {}", source, e.source().begin.line,
                                e.description()));
  }
  return plan_from_tree(from_toml(doc), source, kTomlSyntax);
}

std::string plan_location(const std::string& source, int line) {
  return line > 0 ? fmt::format("{}:{}", source, line) : source;
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
  std::error_code ec;  // a name the system cannot look up (too long, say) is no such file
  if (!fs::exists(path, ec)) {
    for (const char* ext : {".json", ".toml"}) {
      const fs::path candidate = fs::path(plan_zoo_dir()) / (name_or_path + ext);
      if (fs::exists(candidate, ec)) {
        path = candidate;
        break;
      }
    }
  }
  if (!fs::exists(path, ec)) {
    throw UserError(fmt::format(
        "plan '{}': no such file, and no zoo plan of that name{}; zoo plans: {}", name_or_path,
        did_you_mean(name_or_path, plan_zoo_names()), fmt::join(plan_zoo_names(), ", ")));
  }
  const std::string text = read_input_file(path.string(), "plan");
  if (path.extension() == ".toml") return parse_toml(text, path.string());
  VS_USER_CHECK(path.extension() == ".json", "plan {}: use a .json or .toml file", path.string());
  return parse_json(text, path.string());
}

}  // namespace vescale
