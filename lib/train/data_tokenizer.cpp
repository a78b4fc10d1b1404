#include "train/data_tokenizer.h"

#include <fmt/format.h>

#include <filesystem>

#include "core/error.h"
#include "data/token_data.h"

namespace vescale {
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
    const TokenMeta meta = read_token_meta(c.data_path);
    VS_USER_CHECK(meta.tokenizer.empty() || meta.tokenizer == t->identity(),
                  "{} is {}, but {} says its tokens were made by {}{}: name that tokenizer, or "
                  "prepare the data again with this one",
                  key, t->identity(), (std::filesystem::path(c.data_path) / "meta.json").string(),
                  meta.tokenizer,
                  meta.tokenizer_path.empty() ? "" : fmt::format(" ({})", meta.tokenizer_path));
  }
  const int64_t vocab = c.family().vocab_size(c.model_spec());
  VS_USER_CHECK(t->vocab_size() <= vocab,
                "{} has {} tokens, more than the model's vocabulary of {} (model.vocab_size)", key,
                t->vocab_size(), vocab);
  return t;
}

}  // namespace vescale
