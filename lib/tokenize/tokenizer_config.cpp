#include "tokenize/tokenizer_config.h"

#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/input_file.h"

namespace vescale {

TokenizerConfig read_tokenizer_config(const std::string& tokenizer_path) {
  using nlohmann::json;
  TokenizerConfig out;
  const std::filesystem::path file =
      std::filesystem::path(tokenizer_path).parent_path() / "tokenizer_config.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) return out;
  out.path = file.string();
  // A special token is its content, or an AddedToken object holding it.
  const auto token = [&](const json& c, const char* key) -> std::string {
    if (!c.contains(key) || c[key].is_null()) return "";
    const json& t = c[key];
    VS_USER_CHECK(t.is_string() || (t.is_object() && t.contains("content")),
                  "tokenizer {}: {} has {} of the wrong type (a string or an object with "
                  "\"content\")",
                  tokenizer_path, out.path, key);
    return t.is_string() ? t.get<std::string>() : t["content"].get<std::string>();
  };
  try {
    const json c = json::parse(read_input_file(out.path, "tokenizer_config.json"));
    VS_USER_CHECK(c.is_object(), "tokenizer {}: {} is not a JSON object", tokenizer_path, out.path);
    out.eos_token = token(c, "eos_token");
    out.bos_token = token(c, "bos_token");
    if (c.contains("add_bos_token") && !c["add_bos_token"].is_null()) {
      VS_USER_CHECK(c["add_bos_token"].is_boolean(),
                    "tokenizer {}: {} has add_bos_token = {}; it is true or false", tokenizer_path,
                    out.path, c["add_bos_token"].dump());
      out.add_bos_token = c["add_bos_token"].get<bool>();
    }
  } catch (const json::exception& e) {
    throw UserError(
        fmt::format("tokenizer {}: {} is not JSON ({})", tokenizer_path, out.path, e.what()));
  }
  return out;
}

}  // namespace vescale
