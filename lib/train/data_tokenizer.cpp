#include "train/data_tokenizer.h"

#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/input_file.h"

namespace vescale {
namespace {

/// The identity of the tokenizer meta.json in `folder` records, "" when it records none.
std::string recorded_identity(const std::filesystem::path& folder, std::string* recorded_path) {
  const std::filesystem::path meta_path = folder / "meta.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(meta_path, ec)) return "";
  const nlohmann::json meta = nlohmann::json::parse(read_input_file(meta_path.string(), "data"),
                                                    nullptr, /*allow_exceptions=*/false);
  if (!meta.is_object() || !meta.contains("tokenizer") || !meta["tokenizer"].is_string()) return "";
  if (meta.contains("tokenizer_path") && meta["tokenizer_path"].is_string())
    *recorded_path = meta["tokenizer_path"].get<std::string>();
  return meta["tokenizer"].get<std::string>();
}

}  // namespace

std::unique_ptr<Tokenizer> open_data_tokenizer(const JobConfig& c) {
  if (c.data_tokenizer.empty()) return nullptr;
  const std::string key =
      fmt::format("config {}: data.tokenizer = \"{}\"", c.source, c.data_tokenizer);
  VS_USER_CHECK(c.data_source != DataSource::kText || c.data_tokenizer == "bytes",
                "{} with data.source = \"text\": that source trains on the text's bytes; drop "
                "data.tokenizer (or say \"bytes\"), or tokenize the text with data prepare and "
                "train on data.source = \"tokens\"",
                key);
  std::unique_ptr<Tokenizer> t;
  try {
    t = open_tokenizer(c.data_tokenizer);
  } catch (const UserError& e) {
    throw UserError(fmt::format("{}: {}", key, e.what()));
  }
  if (c.data_source == DataSource::kTokens) {
    std::string recorded_path;
    const std::string recorded = recorded_identity(c.data_path, &recorded_path);
    VS_USER_CHECK(recorded.empty() || recorded == t->identity(),
                  "{} is {}, but {} says its tokens were made by {}{}: name that tokenizer, or "
                  "prepare the data again with this one",
                  key, t->identity(), (std::filesystem::path(c.data_path) / "meta.json").string(),
                  recorded, recorded_path.empty() ? "" : fmt::format(" ({})", recorded_path));
  }
  const int64_t vocab = c.family().vocab_size(c.model_spec());
  VS_USER_CHECK(t->vocab_size() <= vocab,
                "{} has {} tokens, more than the model's vocabulary of {} (model.vocab_size)", key,
                t->vocab_size(), vocab);
  return t;
}

}  // namespace vescale
