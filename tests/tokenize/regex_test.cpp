// The pre-tokenizer regex matcher (NOTE [Pre-tokenizer regex]): GPT-2's and Llama 3's splits,
// Oniguruma's \s and case folding, what find() says it read, and the constructs it refuses.
#include "tokenize/regex.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "tokenize/unicode.h"

namespace vescale {
namespace {

constexpr const char* kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr const char* kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

/// The matches of `pattern` in `text`, joined by '|'.
std::string split(const char* pattern, const std::string& text) {
  const Regex re(pattern);
  const unicode::DecodedText d = unicode::decode_utf8(text);
  std::string out;
  for (size_t pos = 0; pos < d.points.size();) {
    const auto m = re.find(d.points.data(), pos, d.points.size());
    if (!m) break;
    if (!out.empty()) out += '|';
    out += text.substr(d.offsets[m->begin], d.offsets[m->end] - d.offsets[m->begin]);
    pos = m->end;
  }
  return out;
}

TEST(Regex, Gpt2AndLlama3Splits) {
  EXPECT_EQ(split(kGpt2, "Hello world's 12345"), "Hello| world|'s| 12345");
  EXPECT_EQ(split(kLlama3, "Hello world's 12345"), "Hello| world|'s| |123|45");
  // \s+(?!\S) leaves the last space to the word; the contraction ignores case only in Llama 3.
  EXPECT_EQ(split(kGpt2, "a   b IT'S"), "a|  | b| IT|'|S");
  EXPECT_EQ(split(kLlama3, "a   b IT'S\n\n  y"), "a|  | b| IT|'S|\n\n| | y");
  // Letters and numbers of any script, and U+3000 as a space.
  EXPECT_EQ(split(kGpt2, "caf\u00e9 \u4e2d\u6587\u3000\u0661\u0662!"),
            "caf\u00e9| \u4e2d\u6587|\u3000|\u0661\u0662|!");
}

TEST(Regex, OnigurumaSpaceAndCaseFolding) {
  for (const char32_t c :
       {U'\t', U'\n', U'\v', U'\f', U'\r', U' ', U'\u0085', U'\u00a0', U'\u1680', U'\u2000',
        U'\u200a', U'\u2028', U'\u2029', U'\u202f', U'\u205f', U'\u3000'})
    EXPECT_TRUE(unicode::white_space(c)) << static_cast<uint32_t>(c);
  for (const char32_t c : {U'\x1c', U'\x1f', U'\u180e', U'\u200b', U'x'})
    EXPECT_FALSE(unicode::white_space(c)) << static_cast<uint32_t>(c);
  EXPECT_EQ(split("(?i:'s)", "'S 's '\u017f"), "'S|'s|'\u017f");  // long s folds to s
  EXPECT_EQ(split("(?i)k+", "kK\u212a"), "kK\u212a");             // and the Kelvin sign to k
  EXPECT_EQ(split("[a-c]{2}|x{1,}?", "abcxx"), "ab|x|x");
  EXPECT_EQ(split("y{,2}", "yyy"), "yy|y");  // Oniguruma's {,n}
}

TEST(Regex, StrayBytesAreNeitherLettersNorSpaces) {
  EXPECT_EQ(split(kGpt2, "ab\xff\xfe cd"), "ab|\xff\xfe| cd");
  EXPECT_EQ(unicode::decode_utf8("\xe2\x82 \xed\xa0\x80").points.size(), 6u);  // cut, surrogate
}

TEST(Regex, ProbeSaysWhatFindRead) {
  const Regex re(kGpt2);
  const unicode::DecodedText d = unicode::decode_utf8("hello world");
  Regex::Probe probe;
  auto m = re.find(d.points.data(), 0, d.points.size(), &probe);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->end, 5u);
  EXPECT_FALSE(probe.looked_at_end);
  EXPECT_EQ(probe.consumed_end, 5u);  // the space stopped the letters without being taken
  m = re.find(d.points.data(), 5, d.points.size(), &probe);
  EXPECT_TRUE(probe.looked_at_end);  // " world" might go on
  // (?!\S) took the letter after the spaces before giving one space back.
  const unicode::DecodedText s = unicode::decode_utf8("a   b");
  m = re.find(s.points.data(), 1, s.points.size(), &probe);
  EXPECT_EQ(m->end, 3u);
  EXPECT_EQ(probe.consumed_end, 5u);
}

TEST(Regex, RefusesWhatItDoesNotTakeByName) {
  for (const auto& [pattern, needle] :
       std::vector<std::pair<std::string, std::string>>{{"(?<=a)b", "lookbehind"},
                                                        {"^a", "anchor"},
                                                        {"a++", "possessive"},
                                                        {"\\bword", "the escape \\b"},
                                                        {"\\p{Greek}", "unknown property"},
                                                        {"(a", "without its ')'"},
                                                        {"[a-", "without its ']'"},
                                                        {"(?:a?)*", "can match nothing"}}) {
    try {
      Regex re(pattern);
      ADD_FAILURE() << pattern << " was taken";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace vescale
