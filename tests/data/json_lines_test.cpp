// NOTE [JSON-lines corpora], NOTE [Chat template]: a corpus as text files, as JSON lines and as
// gzip and zstd JSON lines (several members and frames) gives the same token files; fine-tuning
// examples become the tokens and the loss mask a by-hand rendering says; a bad line or stream
// stops data prepare naming its file:line, with the folder's earlier files left as they were.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <zlib.h>
#include <zstd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/ignore_target.h"
#include "data/prepare_tokens.h"
#include "data/token_data.h"
#include "support/fuzz.h"
#include "support/temp_folder.h"

namespace vescale {
namespace {

namespace fs = std::filesystem;
using testing::temp_folder;
const auto& read_file = testing::read_bytes;
const auto& write_file = testing::write_bytes;

/// `text` as a JSON string literal.
std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

/// `bytes` as gzip, in `members` members one after another.
std::string gzip(const std::string& bytes, int members) {
  std::string out;
  const size_t part = bytes.size() / static_cast<size_t>(members) + 1;
  for (size_t at = 0; at < bytes.size(); at += part) {
    const std::string piece = bytes.substr(at, part);
    z_stream z{};
    EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
    std::string member(deflateBound(&z, piece.size()), '\0');
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(piece.data()));
    z.avail_in = static_cast<uInt>(piece.size());
    z.next_out = reinterpret_cast<Bytef*>(member.data());
    z.avail_out = static_cast<uInt>(member.size());
    EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
    member.resize(z.total_out);
    deflateEnd(&z);
    out += member;
  }
  return out;
}

/// `bytes` as zstd, in `frames` frames one after another.
std::string zstd(const std::string& bytes, int frames) {
  std::string out;
  const size_t part = bytes.size() / static_cast<size_t>(frames) + 1;
  for (size_t at = 0; at < bytes.size(); at += part) {
    const std::string piece = bytes.substr(at, part);
    std::string frame(ZSTD_compressBound(piece.size()), '\0');
    const size_t n = ZSTD_compress(frame.data(), frame.size(), piece.data(), piece.size(), 3);
    EXPECT_FALSE(ZSTD_isError(n));
    out += frame.substr(0, n);
  }
  return out;
}

PrepareSummary prepare(const std::vector<std::string>& files, const std::string& out,
                       PrepareOptions o = {}) {
  o.files = files;
  o.output = out;
  o.threads = 2;
  return prepare_tokens(o, [](const std::string&) {});
}

TEST(JsonLines, CompressedAndPlainGiveTheTextFilesTokens) {
  const std::string dir = temp_folder("json-lines-formats");
  // Documents with quotes, newlines, UTF-8 and one longer than a read block.
  std::vector<std::string> docs;
  for (int i = 0; i < 40; ++i) {
    std::string d;
    for (int w = 0; w < 5 + (i * 37) % 300; ++w)
      d += std::vector<std::string>{"alpha ", "\"beta\" ", "γάμμα ", "new\nline ",
                                    "€ "}[(i + w) % 5];
    docs.push_back(d);
  }
  docs[7] = std::string(1500000, 'x');
  std::vector<std::string> texts;
  std::string lines;
  for (size_t i = 0; i < docs.size(); ++i) {
    texts.push_back(dir + "/doc" + std::to_string(i) + ".txt");
    write_file(texts.back(), docs[i]);
    lines += "{\"id\": " + std::to_string(i) + ", \"text\": " + json_string(docs[i]) + "}\n";
    if (i % 9 == 0) lines += "  \n";  // blank lines are skipped
  }
  write_file(dir + "/c.jsonl", lines);
  write_file(dir + "/c.jsonl.gz", gzip(lines, 3) + std::string(512, '\0'));  // zero padding
  write_file(dir + "/c.jsonl.zst", zstd(lines, 3));
  const PrepareSummary plain = prepare(texts, dir + "/plain");
  for (const std::string name : {"c.jsonl", "c.jsonl.gz", "c.jsonl.zst"}) {
    const PrepareSummary s = prepare({dir + "/" + name}, dir + "/out-" + name);
    std::printf(
        "[json lines] %s: %lld documents, %lld tokens, %lld bytes read of %lld in the file\n",
        name.c_str(), static_cast<long long>(s.documents),
        static_cast<long long>(s.train_tokens + s.val_tokens), static_cast<long long>(s.text_bytes),
        static_cast<long long>(s.bytes));
    EXPECT_EQ(s.documents, plain.documents) << name;
    for (const char* bin : {"train.bin", "val.bin"})
      EXPECT_TRUE(read_file(dir + "/plain/" + bin) == read_file(dir + "/out-" + name + "/" + bin))
          << name << " " << bin;
  }
  // --format jsonl reads any name; --field another field.
  write_file(dir + "/other.txt", "{\"body\": \"one one\"}\n{\"body\": \"two\"}\n");
  PrepareOptions field;
  field.format = "jsonl";
  field.field = "body";
  field.val_fraction = 0.3;
  EXPECT_EQ(prepare({dir + "/other.txt"}, dir + "/field", field).documents, 2);
  EXPECT_EQ(read_file(dir + "/field/train.bin") + read_file(dir + "/field/val.bin"),
            std::string("o\0n\0e\0 \0o\0n\0e\0t\0w\0o\0", 20));
}

TEST(JsonLines, TheMaskIsTheByHandRenderingOfThreeExamples) {
  const std::string dir = temp_folder("json-lines-sft");
  write_file(dir + "/t.toml",
             "[system]\nbefore = \"S:\"\nafter = \"|\"\n[user]\nbefore = \"U:\"\nafter = \"|\"\n"
             "[assistant]\nbefore = \"A:\"\nafter = \"#\"\n");
  write_file(dir + "/e.jsonl",
             "{\"prompt\": \"hi\", \"response\": \"yo\"}\n"
             "{\"messages\": [{\"role\": \"system\", \"content\": \"be\"}, {\"role\": \"user\", "
             "\"content\": \"q\"}, {\"role\": \"assistant\", \"content\": \"a\"}]}\n"
             "{\"messages\": [{\"role\": \"user\", \"content\": \"1\"}, {\"role\": \"assistant\", "
             "\"content\": \"2\"}, {\"role\": \"user\", \"content\": \"3\"}, {\"role\": "
             "\"assistant\", \"content\": \"44\"}]}\n");
  PrepareOptions o;
  o.sft = true;
  o.chat_template = dir + "/t.toml";
  o.val_fraction = 0.1;
  const PrepareSummary s = prepare({dir + "/e.jsonl"}, dir + "/out", o);
  // By hand: the assistant's content and its end ("#") trained, nothing else.
  const std::vector<std::pair<std::string, bool>> by_hand{
      {"U:hi|A:", false}, {"yo#", true}, {"S:be|U:q|A:", false}, {"a#", true},
      {"U:1|A:", false},  {"2#", true},  {"U:3|A:", false},      {"44#", true}};
  std::string text, mask;
  for (const auto& [piece, trained] : by_hand) {
    text += piece;
    mask += std::string(piece.size(), trained ? '1' : '_');
  }
  std::string tokens;
  const std::string bins = read_file(dir + "/out/train.bin") + read_file(dir + "/out/val.bin");
  for (size_t i = 0; i < bins.size(); i += 2)
    tokens += bins[i];
  std::string got_mask;
  for (const char m : read_file(dir + "/out/train.mask.bin") + read_file(dir + "/out/val.mask.bin"))
    got_mask += m == 1 ? '1' : '_';
  std::printf("[sft] %s\n[sft] %s\n", tokens.c_str(), got_mask.c_str());
  EXPECT_EQ(tokens, text);
  EXPECT_EQ(got_mask, mask);
  EXPECT_EQ(s.documents, 3);
  EXPECT_EQ(s.trained_tokens, 10);
  // Where each example starts: 0, 10, 23 (the third in val.docs.bin only if past the split).
  const std::string starts = read_file(dir + "/out/train.docs.bin");
  ASSERT_EQ(starts.size(), 3 * sizeof(uint64_t));
  const auto* at = reinterpret_cast<const uint64_t*>(starts.data());
  EXPECT_EQ((std::vector<uint64_t>{at[0], at[1], at[2]}), (std::vector<uint64_t>{0, 10, 23}));
  EXPECT_NE(read_file(dir + "/out/meta.json").find("\"mask\": true"), std::string::npos);
  // NOTE [Loss masks]: the first example as a padded row of 12: the targets the mask trains on
  // ("yo#"), kIgnoreTarget elsewhere; the examples' rows start at their starts.
  const TokenData d = load_bin_tokens(dir + "/out", 256);
  const std::vector<RowWindow> first{{0, 10}};
  const auto [x, y] = window_batch(*d.train, d.train_mask.get(), first, 12);
  std::vector<int64_t> expected(12, kIgnoreTarget);
  expected[6] = 'y';
  expected[7] = 'o';
  expected[8] = '#';
  EXPECT_EQ(std::vector<int64_t>(y.data_ptr<int64_t>(), y.data_ptr<int64_t>() + 12), expected);
  EXPECT_EQ(x[0][9].item<int64_t>(), '#');
  EXPECT_EQ(x[0][10].item<int64_t>(), 0);  // padding
  EXPECT_EQ(trained_targets(*d.train_mask, first), 3);
  const BatchSlice all{8, 0, 8};
  for (const RowWindow& row : batch_windows(d.train->size(), d.train_starts, true, 1, 0, 12, all))
    EXPECT_TRUE((row.start == 0 && row.tokens == 10) || (row.start == 10 && row.tokens == 13) ||
                (row.start == 23 && row.tokens == 13))
        << row.start << " " << row.tokens;
}

/// data prepare's error for the JSON-lines file `bytes`, named `name`, with the output folder's
/// earlier files (from a good prepare) unchanged after it.
std::string bad_input_error(const std::string& dir, const std::string& name,
                            const std::string& bytes) {
  write_file(dir + "/good.jsonl", "{\"text\": \"good old tokens\"}\n{\"text\": \"more\"}\n");
  PrepareOptions o;
  o.val_fraction = 0.2;
  prepare({dir + "/good.jsonl"}, dir + "/out", o);
  const std::string before = read_file(dir + "/out/train.bin") + read_file(dir + "/out/meta.json");
  write_file(dir + "/" + name, bytes);
  std::string error = "(no error)";
  try {
    prepare({dir + "/" + name}, dir + "/out", o);
  } catch (const UserError& e) {
    error = e.what();
  }
  EXPECT_EQ(read_file(dir + "/out/train.bin") + read_file(dir + "/out/meta.json"), before) << name;
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir + "/out"))
    files += entry.path().extension() == ".partial" ? 100 : 1;
  EXPECT_EQ(files, 3u) << name << ": no partial left, nothing added";
  return error;
}

TEST(JsonLines, BadLinesNameFileAndLineAndWriteNothing) {
  const std::string dir = temp_folder("json-lines-bad");
  const std::string ok = "{\"text\": \"fine\"}\n";
  const std::vector<std::pair<std::string, std::string>> cases{
      {"a.jsonl", ok + "{\"text\": \"cut\"\n"},
      {"b.jsonl", ok + ok + "{\"body\": \"x\", \"txt\": \"y\"}\n"},
      {"c.jsonl", ok + "{\"text\": 5}\n"},
      {"d.jsonl", "[\"text\"]\n"},
      {"e.jsonl.gz", gzip(ok + ok + ok, 1).substr(0, 20)},
      {"f.jsonl.zst", zstd(ok + ok + ok, 1).substr(0, 12)},
      {"g.jsonl.gz", ok},
      {"h.jsonl", ok + "{\"text\": 1e999}\n"},
  };
  const std::vector<std::string> expected{
      "a.jsonl:2: not JSON: parse error",
      "b.jsonl:3: no field \"text\" (its fields: \"body\", \"txt\") (did you mean 'txt'?)",
      "c.jsonl:2: field \"text\" is a number, not a string",
      "d.jsonl:1: an array, not a JSON object",
      "e.jsonl.gz: truncated compressed stream",
      "f.jsonl.zst: truncated compressed stream",
      "g.jsonl.gz's name ends in .gz but it holds no compressed data",
      "h.jsonl:2: not JSON",
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string error = bad_input_error(dir, cases[i].first, cases[i].second);
    std::printf("[json lines] %s\n", error.c_str());
    EXPECT_NE(error.find(expected[i]), std::string::npos) << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  }
  // --skip-bad-lines: counted, the first named, the good lines kept.
  write_file(dir + "/mixed.jsonl", ok + "nope\n" + ok + "{\"text\": null}\n" + ok);
  PrepareOptions skip;
  skip.skip_bad_lines = true;
  skip.val_fraction = 0.2;
  const PrepareSummary s = prepare({dir + "/mixed.jsonl"}, dir + "/skip", skip);
  EXPECT_EQ(s.documents, 3);
  EXPECT_EQ(s.bad_lines, 2);
  EXPECT_NE(s.first_bad_line.find("mixed.jsonl:2: not JSON"), std::string::npos)
      << s.first_bad_line;
  // A stream cut inside its last line loses that line; cut after it (only the gzip trailer
  // gone), none.
  const std::string whole = gzip(ok + ok + ok + ok, 1);
  std::string last = "{\"text\": \"";
  uint32_t random = 12345;  // letters that do not compress away
  for (int i = 0; i < 300; ++i) {
    random = random * 1103515245u + 12345u;
    last += static_cast<char>('a' + (random >> 16) % 26);
  }
  const std::string with_last = gzip(ok + ok + ok + last + "\"}\n", 1);
  write_file(dir + "/cut-line.jsonl.gz", with_last.substr(0, with_last.size() - 100));
  write_file(dir + "/cut-trailer.jsonl.gz", whole.substr(0, whole.size() - 8));
  for (const auto& [name, documents, bad] :
       {std::tuple{"cut-line.jsonl.gz", 3, 1}, std::tuple{"cut-trailer.jsonl.gz", 4, 0}}) {
    const PrepareSummary cut = prepare({dir + "/" + name}, dir + "/cut", skip);
    std::printf("[json lines] %s: %lld documents, %lld bad lines (%s)\n", name,
                static_cast<long long>(cut.documents), static_cast<long long>(cut.bad_lines),
                cut.first_bad_line.c_str());
    EXPECT_EQ(cut.documents, documents) << name;
    EXPECT_EQ(cut.bad_lines, bad) << name;
  }
}

}  // namespace
}  // namespace vescale
