#include "data/chat_template.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <toml++/toml.h>

#include <algorithm>
#include <optional>

#include "core/error.h"
#include "core/input_file.h"
#include "core/suggest.h"

namespace vescale {
namespace {

const std::vector<std::string> kRoles{"system", "user", "assistant"};
const std::vector<std::string> kStrings{"before", "after"};

}  // namespace

std::map<std::string, std::string> ChatTemplate::strings() const {
  std::map<std::string, std::string> out;
  for (const auto& [role, r] : roles_) {
    out[role + ".before"] = r.before;
    out[role + ".after"] = r.after;
  }
  return out;
}

ChatTemplate ChatTemplate::load(const std::string& path) {
  const std::string text = read_input_file(path, "chat template");
  toml::table doc;
  try {
    doc = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    throw UserError(fmt::format("chat template {}:{}: not valid TOML: {}", path,
                                e.source().begin.line, e.description()));
  }
  ChatTemplate t;
  t.source_ = path;
  for (const auto& [key, node] : doc) {
    const std::string role(key.str());
    const int line = static_cast<int>(node.source().begin.line);
    VS_USER_CHECK(node.is_table(),
                  "chat template {}:{}: {} is a key outside any table; a template's strings go "
                  "in a role's table ([user] then before = \"...\" and after = \"...\"), of "
                  "[{}]",
                  path, line, role, fmt::join(kRoles, "], ["));
    VS_USER_CHECK(std::find(kRoles.begin(), kRoles.end(), role) != kRoles.end(),
                  "chat template {}:{}: [{}] is not a role: the tables are [{}]{}", path, line,
                  role, fmt::join(kRoles, "], ["), did_you_mean(role, kRoles));
    const toml::table* table = node.as_table();
    VS_USER_CHECK(table != nullptr, "chat template {}:{}: {} must be a table, [{}]", path, line,
                  role, role);
    Role r;
    for (const auto& [name, value] : *table) {
      const std::string field(name.str());
      const int at = static_cast<int>(value.source().begin.line);
      VS_USER_CHECK(std::find(kStrings.begin(), kStrings.end(), field) != kStrings.end(),
                    "chat template {}:{}: {}.{} is not a key: a role has before and after{}", path,
                    at, role, field, did_you_mean(field, kStrings));
      const std::optional<std::string> s = value.value<std::string>();
      VS_USER_CHECK(s.has_value(), "chat template {}:{}: {}.{} must be a string", path, at, role,
                    field);
      (field == "before" ? r.before : r.after) = *s;
    }
    t.roles_[role] = r;
  }
  for (const char* role : {"user", "assistant"})
    VS_USER_CHECK(t.has_role(role),
                  "chat template {}: no [{}] table; a template needs [user] and [assistant] "
                  "(and [system] for system messages)",
                  path, role);
  VS_USER_CHECK(!t.answer_end().empty(),
                "chat template {}: assistant.after is empty: it ends each answer, and generate "
                "stops at it",
                path);
  return t;
}

std::vector<ChatSegment> ChatTemplate::render(const std::vector<ChatMessage>& messages) const {
  std::vector<ChatSegment> out;
  for (const ChatMessage& m : messages) {
    const auto role = roles_.find(m.role);
    VS_USER_CHECK(role != roles_.end(), "role \"{}\" has no [{}] table in chat template {}", m.role,
                  m.role, source_);
    const bool assistant = m.role == "assistant";
    out.push_back({role->second.before, false});
    out.push_back({m.content, assistant});
    out.push_back({role->second.after, assistant});
  }
  return out;
}

std::vector<std::string> ChatTemplate::question(const std::string& prompt) const {
  const Role& user = roles_.at("user");
  return {user.before, prompt, user.after, roles_.at("assistant").before};
}

const std::string& ChatTemplate::answer_end() const {
  return roles_.at("assistant").after;
}

}  // namespace vescale
