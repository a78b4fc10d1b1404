#include "tokenize/tokenizer.h"

#include <fmt/format.h>

#include <filesystem>

#include "core/error.h"
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
};

}  // namespace

std::unique_ptr<Tokenizer> open_tokenizer(const std::string& path) {
  if (path == "bytes") return std::make_unique<ByteTokenizer>();
  std::error_code ec;
  VS_USER_CHECK(std::filesystem::is_regular_file(path, ec),
                "tokenizer {}: no such file (a tokenizer is \"bytes\" or a SentencePiece model "
                "file such as tokenizer.model, e.g. from `vescale-train tokenizer train`)",
                path);
  return open_sentencepiece(path);
}

}  // namespace vescale
