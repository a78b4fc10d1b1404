// Tokenizer::stable_prefix, what `data prepare` streams by (NOTE [Token files]): on random text
// cut at random places, the ids of the text are the ids of the stable prefix followed by those of
// the rest, for bytes and for byte-level BPE with GPT-2's and Llama 3's pre-tokenizers.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "tokenize/tokenizer.h"

namespace vescale {
namespace {

/// A tokenizer.json with the 256 byte characters, a few merges and two added tokens.
std::string tokenizer_json(bool llama3, bool prefix_space = false) {
  std::string vocab, chars[256];
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const char32_t c = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(next++);
    if (c < 0x80) {
      chars[b] = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : std::string(1, static_cast<char>(c));
    } else {
      chars[b] = {static_cast<char>(0xC0 | (c >> 6)), static_cast<char>(0x80 | (c & 0x3F))};
    }
    vocab += "\"" + chars[b] + "\": " + std::to_string(b) + ", ";
  }
  const std::string G = "\xc4\xa0";  // the space's character
  vocab += "\"" + G + "t\": 256, \"he\": 257, \"" + G + "the\": 258, \"in\": 259, \"" + G + G +
           "\": 260, \"12\": 261, \"\xc3\x83\xc2\xa9\": 264, \"f\xc3\x83\xc2\xa9\": 265";
  const std::string merges =
      "\"" + G + " t\", \"h e\", \"" + G + "t he\", \"i n\", \"" + G + " " + G +
      "\", \"1 2\", "
      "\"\xc3\x83 \xc2\xa9\", \"f \xc3\x83\xc2\xa9\"";  // é's two bytes, then "fé"
  const std::string pre =
      llama3
          ? R"({"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]})"
          : std::string(R"({"type": "ByteLevel", "add_prefix_space": )") +
                (prefix_space ? "true" : "false") + R"(, "use_regex": true})";
  return R"({"added_tokens": [{"id": 262, "content": "<|endoftext|>", "special": true, "normalized": false}, {"id": 263, "content": "<x>", "special": false, "normalized": true}], "normalizer": null, "pre_tokenizer": )" +
         pre + R"(, "decoder": {"type": "ByteLevel"}, "model": {"type": "BPE", "ignore_merges": )" +
         (llama3 ? "true" : "false") + R"(, "vocab": {)" + vocab + R"(}, "merges": [)" + merges +
         "]}}";
}

std::string random_text(std::mt19937& rng, size_t n) {
  static const std::vector<std::string> kParts = {" ",
                                                  " ",
                                                  "  ",
                                                  "\n",
                                                  "\n\n",
                                                  "\t",
                                                  "the",
                                                  " the",
                                                  "in",
                                                  "12",
                                                  "345",
                                                  "'s",
                                                  "'S",
                                                  "!",
                                                  "?!",
                                                  "caf\xc3\xa9",
                                                  "\xe4\xb8\xad",
                                                  "\xf0\x9f\x98\x80",
                                                  "\xff",
                                                  "<|endoftext|>",
                                                  "<x>",
                                                  "<|end",
                                                  "x",
                                                  "Q",
                                                  "\xc2\xa0",
                                                  "\xc3\xa9",
                                                  "\xd0\xb6\xd0\xb8\xd0\xb7\xd0\xbd\xd1\x8c"};
  std::string text;
  while (text.size() < n)
    text += kParts[rng() % kParts.size()];
  return text;
}

void expect_stable(const Tokenizer& t, uint32_t seed) {
  std::mt19937 rng(seed);
  int cut_somewhere = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const std::string text = random_text(rng, 50 + rng() % 400);
    const std::vector<int64_t> whole = t.encode(text);
    const size_t head = rng() % (text.size() + 1);
    const size_t p = t.stable_prefix(std::string_view(text).substr(0, head));
    ASSERT_LE(p, head);
    if (p > 0) ++cut_somewhere;
    std::vector<int64_t> parts = t.encode(std::string_view(text).substr(0, p));
    const std::vector<int64_t> rest = t.encode(std::string_view(text).substr(p));
    parts.insert(parts.end(), rest.begin(), rest.end());
    ASSERT_EQ(parts, whole) << t.identity() << " cut at " << p << " of " << head << ": " << text;
  }
  EXPECT_GT(cut_somewhere, 200) << t.identity() << " found too few places to cut";
}

TEST(StablePrefix, BytesAndByteLevelBpeCutWithoutChangingTheIds) {
  expect_stable(*open_tokenizer("bytes"), 1);
  for (const bool llama3 : {false, true}) {
    const auto dir = std::filesystem::temp_directory_path() /
                     ("vescale-stable-prefix-" + std::to_string(llama3));
    std::filesystem::create_directories(dir);
    const auto path = dir / "tokenizer.json";
    std::ofstream(path) << tokenizer_json(llama3);
    const auto t = open_tokenizer(path.string());
    EXPECT_EQ(t->vocab_size(), 266);
    EXPECT_EQ(t->end_of_text(), 262);
    EXPECT_TRUE(t->lossless());
    // The merges and the added tokens took.
    EXPECT_EQ(t->encode(" the<x>12<|endoftext|>"), (std::vector<int64_t>{258, 263, 261, 262}));
    expect_stable(*t, llama3 ? 2 : 3);
    // The margin's end falls inside "é": the cut must not split the word it continues.
    const std::string text = "hello caf\xc3\xa9" + std::string(16, 'x');
    const size_t p = t->stable_prefix(text);
    std::vector<int64_t> parts = t->encode(std::string_view(text).substr(0, p));
    const std::vector<int64_t> rest = t->encode(std::string_view(text).substr(p));
    parts.insert(parts.end(), rest.begin(), rest.end());
    EXPECT_EQ(parts, t->encode(text)) << "cut at " << p;
    std::filesystem::remove_all(dir);
  }
}

TEST(StablePrefix, AddPrefixSpaceCutsOnlyBeforeASpace) {
  const auto dir = std::filesystem::temp_directory_path() / "vescale-stable-prefix-spaced";
  std::filesystem::create_directories(dir);
  const auto path = dir / "tokenizer.json";
  std::ofstream(path) << tokenizer_json(false, true);
  const auto t = open_tokenizer(path.string());
  EXPECT_FALSE(t->lossless());  // "x" encodes as " x"
  EXPECT_EQ(t->encode("the"), t->encode(" the"));
  expect_stable(*t, 4);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace vescale
