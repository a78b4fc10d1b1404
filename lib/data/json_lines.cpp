#include "data/json_lines.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "core/error.h"
#include "core/suggest.h"

namespace vescale {
namespace {

using nlohmann::json;

/// "a number", "an array", ...: a JSON value's type as a message names it.
std::string type_phrase(const json& v) {
  const std::string t = v.type_name();
  return (t == "array" || t == "object" ? "an " : "a ") + t;
}

/// The object's keys, for a message (at most 6).
std::string keys_of(const json& object) {
  std::vector<std::string> keys;
  for (const auto& [key, value] : object.items()) {
    if (keys.size() == 6) {
      keys.emplace_back("...");
      break;
    }
    keys.push_back("\"" + key + "\"");
  }
  return keys.empty() ? "none" : fmt::format("{}", fmt::join(keys, ", "));
}

/// The string `object[name]` into `out`, else the reason in `why`.
bool string_field(const json& object, const std::string& name, const std::string& where,
                  std::string& out, std::string& why) {
  const auto it = object.find(name);
  if (it == object.end()) {
    std::vector<std::string> names;
    for (const auto& [key, value] : object.items())
      names.push_back(key);
    why = fmt::format("{}no field \"{}\" (its fields: {}){}", where, name, keys_of(object),
                      did_you_mean(name, names));
    return false;
  }
  if (!it->is_string()) {
    why = fmt::format("{}field \"{}\" is {}, not a string", where, name, type_phrase(*it));
    return false;
  }
  out = it->get<std::string>();
  return true;
}

/// A fine-tuning example's messages: {"prompt", "response"} or {"messages": [...]}.
bool example_messages(const json& line, const ChatTemplate& chat, std::vector<ChatMessage>& out,
                      std::string& why) {
  if (!line.contains("messages")) {
    if (!line.contains("prompt") && !line.contains("response")) {
      why = fmt::format(
          "an example needs \"messages\" or \"prompt\" and \"response\" (its fields: {})",
          keys_of(line));
      return false;
    }
    ChatMessage user{"user", ""}, assistant{"assistant", ""};
    if (!string_field(line, "prompt", "", user.content, why) ||
        !string_field(line, "response", "", assistant.content, why))
      return false;
    out = {user, assistant};
    return true;
  }
  if (line.contains("prompt") || line.contains("response")) {  // which would it be trained on?
    why = fmt::format(
        "an example has \"messages\" and \"{}\": give one or the other (its fields: {})",
        line.contains("prompt") ? "prompt" : "response", keys_of(line));
    return false;
  }
  const json& messages = line["messages"];
  if (!messages.is_array() || messages.empty()) {
    why = fmt::format("\"messages\" is {}, not a list of messages",
                      messages.is_array() ? std::string("empty") : type_phrase(messages));
    return false;
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string where = fmt::format("messages[{}]: ", i);
    if (!messages[i].is_object()) {
      why = fmt::format("{}{}, not an object with \"role\" and \"content\"", where,
                        type_phrase(messages[i]));
      return false;
    }
    ChatMessage m;
    if (!string_field(messages[i], "role", where, m.role, why) ||
        !string_field(messages[i], "content", where, m.content, why))
      return false;
    if (!chat.has_role(m.role)) {
      why = fmt::format("{}role \"{}\" has no [{}] table in chat template {}", where, m.role,
                        m.role, chat.source());
      return false;
    }
    out.push_back(std::move(m));
  }
  if (std::none_of(out.begin(), out.end(),
                   [](const ChatMessage& m) { return m.role == "assistant"; })) {
    why = "no \"assistant\" message: nothing in it to train on";
    return false;
  }
  return true;
}

}  // namespace

bool blank_line(std::string_view line) {
  return line.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

bool read_json_line(std::string_view line, const LineReading& how, std::vector<ChatSegment>& out,
                    std::string& why) {
  const json value = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    // Parsed again for the reason (only a bad line pays for it).
    try {
      const json again = json::parse(line);
      why = "not JSON";                   // (not reached: the first parse failed)
    } catch (const json::exception& e) {  // a parse error, or a number past a double's range
      const std::string what = e.what();
      const size_t colon = what.find("parse error");
      why = "not JSON: " + (colon == std::string::npos ? what : what.substr(colon));
    }
    return false;
  }
  if (!value.is_object()) {
    why = fmt::format("{}, not a JSON object", type_phrase(value));
    return false;
  }
  out.clear();
  if (how.chat == nullptr) {
    std::string text;
    if (!string_field(value, how.field, "", text, why)) return false;
    out.push_back({std::move(text), true});
    return true;
  }
  std::vector<ChatMessage> messages;
  if (!example_messages(value, *how.chat, messages, why)) return false;
  out = how.chat->render(messages);
  return true;
}

}  // namespace vescale
