#include "tokenize/tokenizer.h"

#include <fmt/format.h>

#include <cctype>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/input_file.h"
#include "tokenize/bytelevel_bpe.h"
#include "tokenize/sentencepiece_tokenizer.h"

namespace vescale {

namespace {

/// Each byte its id: today's text source, lossless over any bytes.
class ByteTokenizer final : public Tokenizer {
 public:
  std::vector<int64_t> encode(std::string_view text) const override {
    std::vector<int64_t> ids(text.size());
    for (size_t i = 0; i < text.size(); ++i)
      ids[i] = static_cast<unsigned char>(text[i]);
    return ids;
  }
  std::string decode(const std::vector<int64_t>& ids) const override {
    std::string text(ids.size(), '\0');
    for (size_t i = 0; i < ids.size(); ++i) {
      VS_USER_CHECK(ids[i] >= 0 && ids[i] < 256,
                    "tokenizer bytes: id {} is not a byte (the vocabulary is 0..255)", ids[i]);
      text[i] = static_cast<char>(ids[i]);
    }
    return text;
  }
  int64_t vocab_size() const override { return 256; }
  std::optional<int64_t> end_of_text() const override { return std::nullopt; }
  std::string identity() const override { return "bytes"; }
  bool lossless() const override { return true; }
  size_t stable_prefix(std::string_view text) const override { return text.size(); }
};

/// Whether the file starts like JSON (a tokenizer.json) rather than a SentencePiece model.
bool looks_like_json(const std::string& path) {
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0) return true;
  std::ifstream in(path, std::ios::binary);
  char c = 0;
  while (in.get(c))
    if (!std::isspace(static_cast<unsigned char>(c))) return c == '{' || c == '[';
  return false;
}

}  // namespace

std::unique_ptr<Tokenizer> open_tokenizer(const std::string& path) {
  if (path == "bytes") return std::make_unique<ByteTokenizer>();
  std::error_code ec;
  std::string file = path;
  if (std::filesystem::is_directory(path, ec)) {
    const auto json = std::filesystem::path(path) / "tokenizer.json";
    file = (std::filesystem::exists(json, ec) ? json : json.parent_path() / "tokenizer.model")
               .string();
    VS_USER_CHECK(std::filesystem::exists(file, ec),
                  "tokenizer {}: the folder holds neither tokenizer.json nor tokenizer.model",
                  path);
  }
  // Something that is there but not a file (a FIFO, a device) is named as what it is.
  if (std::filesystem::exists(file, ec)) require_regular_file(file, "tokenizer");
  VS_USER_CHECK(std::filesystem::is_regular_file(file, ec),
                "tokenizer {}: no such file (a tokenizer is \"bytes\", a SentencePiece model "
                "file such as tokenizer.model, e.g. from `vescale-train tokenizer train`, a "
                "Hugging Face tokenizer.json, or a folder holding one)",
                path);
  if (looks_like_json(file)) return open_bytelevel_bpe(file);
  return open_sentencepiece(file);
}

}  // namespace vescale
