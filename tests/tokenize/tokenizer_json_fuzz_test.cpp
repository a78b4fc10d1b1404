// Issue [36] item 6: seeded fuzzing (1,000 cases) of Hugging Face tokenizer.json files through
// open_tokenizer, encode and decode. A damaged file must be refused in one line naming it, or read
// into a tokenizer that encodes and decodes; before [36] a float id was taken as a whole one, an id
// of 2e9 sized a table to it (std::bad_alloc), "merges" as a string was one merge and a missing key
// came out as nlohmann's raw out_of_range.
#include <gtest/gtest.h>

#include <filesystem>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "support/fuzz.h"
#include "support/mutate.h"
#include "tokenize/tokenizer.h"

namespace vescale {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

/// The character GPT-2's byte-level alphabet gives byte `b`, as UTF-8.
std::string byte_character(int b) {
  const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
  int code = b;
  if (!printable) {
    int n = 0;  // the how-manieth unprintable byte this is
    for (int c = 0; c < b; ++c) {
      const bool p = (c >= 33 && c <= 126) || (c >= 161 && c <= 172) || c >= 174;
      n += p ? 0 : 1;
    }
    code = 256 + n;
  }
  std::string out;
  if (code < 0x80) {
    out.push_back(static_cast<char>(code));
  } else {
    out.push_back(static_cast<char>(0xC0 | (code >> 6)));
    out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
  }
  return out;
}

/// A small byte-level BPE tokenizer.json: the 256 bytes, four merges spelling "hello", an
/// end-of-text token.
std::string small_tokenizer_json() {
  ordered_json vocab = ordered_json::object();
  for (int b = 0; b < 256; ++b)
    vocab[byte_character(b)] = b;
  vocab["he"] = 256;
  vocab["ll"] = 257;
  vocab["hell"] = 258;
  vocab["hello"] = 259;
  ordered_json j = {
      {"version", "1.0"},
      {"added_tokens",
       ordered_json::array({{{"id", 260}, {"content", "<|endoftext|>"}, {"special", true}}})},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"},
        {"vocab", vocab},
        {"merges", ordered_json::array({"h e", "l l", "he ll", "hell o"})}}}};
  return j.dump(2);
}

TEST(Fuzz, DamagedTokenizerJsonIsRefusedInOneLineOrEncodesAndDecodes) {
  const fs::path path = fs::path(::testing::TempDir()) / "tokenizer-fuzz.json";
  const std::string good = small_tokenizer_json();
  const std::string text = "hello hello, world <|endoftext|>";
  // The intact file reads and round-trips: the base every case damages is a tokenizer.
  testing::write_bytes(path.string(), good);
  {
    const auto t = open_tokenizer(path.string());
    EXPECT_EQ(t->vocab_size(), 261);
    EXPECT_EQ(t->decode(t->encode(text)), text);
  }
  testing::Mutator mutate(20261128);
  testing::FuzzRun run("tokenizer.json");
  const char* targeted[] = {
      R"("hello": 259)", R"("hello": 259.5)", R"("hello": 2000000000)", R"("hello": 3)",
      R"("hello": -1)",  R"("hello": "259")", R"("hello": 1e300)",      R"("hello": null)",
  };
  for (int i = 0; i < 1000; ++i) {
    std::string damaged;
    std::string what;
    switch (i % 4) {
      case 0:
      case 1:
        damaged = mutate.json(good, testing::hostile_json_values());
        what = "values edited";
        break;
      case 2: {  // the "hello" entry's id: a float, huge, a duplicate, negative, a string
        const char* entry = targeted[mutate.below(std::size(targeted))];
        damaged = good;
        damaged.replace(damaged.find(R"("hello": 259)"), 12, entry);
        what = std::string("vocab entry ") + entry;
        break;
      }
      default: {  // a key the format needs dropped or given another type
        ordered_json j = ordered_json::parse(good);
        const char* keys[] = {"vocab", "merges", "type"};
        const char* key = keys[mutate.below(3)];
        if (mutate.below(2) == 0) {
          j["model"].erase(key);
          what = std::string("model.") + key + " dropped";
        } else {
          j["model"][key] = mutate.below(2) == 0 ? ordered_json("a b") : ordered_json(7);
          what = std::string("model.") + key + " of another type";
        }
        damaged = j.dump(2);
        break;
      }
    }
    testing::write_bytes(path.string(), damaged);
    run.one(std::to_string(i) + " (" + what + ")", damaged.size(), [&] {
      const auto t = open_tokenizer(path.string());
      const std::vector<int64_t> ids = t->encode(text);
      for (const int64_t id : ids)
        EXPECT_TRUE(id >= 0 && id < t->vocab_size()) << what;
      t->decode(ids);
    });
  }
  fs::remove(path);
  run.finish(1000, 60);
}

}  // namespace
}  // namespace vescale
