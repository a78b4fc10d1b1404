// tokenizer train: SentencePiece's own trainer through the plugin (NOTE [SentencePiece plugin]),
// with the checks the library leaves to its log.
//
// NOTE [Training a SentencePiece model]
// The trainer skips a line longer than its max_sentence_length with a warning, stops with
// "Internal: ./src/trainer_interface.cc(428) [!sentences_.empty()]" when no line is left, and
// words its refusals in its own flags (--character_coverage, which this command does not have).
// So before it runs, this command reads the text once itself: each file must be UTF-8 without
// NUL bytes (a binary file is refused with its offset), lines longer than kMaxLineBytes are
// counted and named in a `[tokenizer]` line (they are left out, as the trainer would), and the
// text must keep one line to train on. The special tokens must be distinct and none of the
// model's own pieces. The library's log stays at errors only, and the refusals it still makes
// (a vocabulary too small for the text's characters, or more pieces than the text can make)
// come back as one line in this command's words, with its flag and the number that would do.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <unordered_map>

#include "core/error.h"
#include "core/input_file.h"
#include "core/safe_files.h"
#include "tokenize/sentencepiece_api.h"
#include "tokenize/sentencepiece_tokenizer.h"
#include "tokenize/unicode.h"

namespace vescale {
namespace {

/// The longest line the trainer takes (its max_sentence_length; the library's default is 4,192).
/// Longer lines are left out. BPE would take longer ones, but the unigram trainer's lattice grows
/// with the line.
constexpr int64_t kMaxLineBytes = 16384;

struct TextScan {
  uintmax_t bytes = 0;
  int64_t lines = 0;       ///< non-empty lines
  int64_t long_lines = 0;  ///< of those, longer than kMaxLineBytes
};

/// Reads `path` through: counts its lines and refuses a NUL byte or bytes that are not UTF-8.
void scan_text(const std::string& path, TextScan* scan) {
  std::ifstream in(path, std::ios::binary);
  VS_USER_CHECK(in.good(), "tokenizer train: cannot read {}", path);
  std::string block(1 << 20, '\0'), carry;
  int64_t line = 0;  // bytes of the line so far
  uintmax_t offset = 0;
  auto end_line = [&] {
    if (line > 0) ++scan->lines;
    if (line > kMaxLineBytes) ++scan->long_lines;
    line = 0;
  };
  while (in) {
    in.read(block.data(), static_cast<std::streamsize>(block.size()));
    const size_t got = static_cast<size_t>(in.gcount());
    if (got == 0) break;
    std::string text = carry + block.substr(0, got);
    // A character split by the block's end waits for the next block.
    size_t cut = text.size();
    if (in) {
      size_t back = 0;
      while (back < 3 && back < text.size() &&
             (static_cast<unsigned char>(text[text.size() - 1 - back]) & 0xC0) == 0x80)
        ++back;
      if (back < text.size() && (static_cast<unsigned char>(text[text.size() - 1 - back]) & 0x80))
        cut = text.size() - 1 - back;
    }
    const std::string_view whole(text.data(), cut);
    const size_t nul = whole.find('\0');
    VS_USER_CHECK(nul == std::string_view::npos,
                  "tokenizer train: {} holds a NUL byte at offset {}: not text (the trainer takes "
                  "UTF-8 text files, one sentence a line)",
                  path, offset + nul);
    const int64_t stray = unicode::first_stray_byte(whole);
    VS_USER_CHECK(stray < 0,
                  "tokenizer train: {} is not UTF-8: byte 0x{:02x} at offset {} (convert it, "
                  "e.g. iconv -t UTF-8)",
                  path, stray < 0 ? 0 : static_cast<unsigned char>(whole[stray]),
                  offset + static_cast<uintmax_t>(stray));
    for (const char c : whole) {
      if (c == '\n') {
        end_line();
      } else {
        ++line;
      }
    }
    offset += cut;
    carry = text.substr(cut);
  }
  VS_USER_CHECK(carry.empty(), "tokenizer train: {} ends inside a UTF-8 character", path);
  end_line();
  scan->bytes += offset;
}

/// The reserved pieces a special token may not be: the model's unknown, begin and end pieces
/// and byte fallback's <0x00>..<0xFF>.
bool is_own_piece(const std::string& token) {
  static const std::regex byte_piece("<0x[0-9A-F]{2}>");
  return token == "<unk>" || token == "<s>" || token == "</s>" ||
         std::regex_match(token, byte_piece);
}

/// The trainer's refusal `status` ("Internal: ./src/x.cc(660) [cond] text") in this command's
/// words.
std::string in_our_words(const std::string& status, const TokenizerTrainOptions& o,
                         const std::string& files) {
  std::smatch m;
  static const std::regex too_high(
      R"(Vocabulary size too high \((\d+)\)\. Please set it to a value <= (\d+))");
  if (std::regex_search(status, m, too_high))
    return fmt::format(
        "tokenizer train: --vocab-size {} is more pieces than {} can make: at most {} (more "
        "text makes more)",
        o.vocab_size, files, m[2].str());
  static const std::regex too_low(R"(smaller than required_chars\. (\d+) vs (\d+))");
  if (std::regex_search(status, m, too_low))
    return fmt::format(
        "tokenizer train: --vocab-size {} is too small for {}: its characters, the 256 byte "
        "pieces, <unk>, <s>, </s> and the special tokens need at least {}",
        o.vocab_size, files, m[2].str());
  if (status.find("!sentences_.empty()") != std::string::npos)
    return fmt::format("tokenizer train: {} holds no line to train on", files);
  // Otherwise the library's own words, less the source file and line it names.
  static const std::regex where(R"(^\w+: \S+\(\d+\) (\[[^\]]*\])\s*)");
  std::string rest = status;
  if (std::regex_search(status, m, where)) {
    rest = m.suffix().str();
    if (rest.empty()) rest = "failed: " + m[1].str();
  }
  return fmt::format("tokenizer train: SentencePiece's trainer {}", rest);
}

void check_options(const TokenizerTrainOptions& o) {
  VS_USER_CHECK(!o.files.empty(), "tokenizer train: name at least one text file");
  VS_USER_CHECK(o.type == "bpe" || o.type == "unigram",
                "tokenizer train: --type {} is not one of bpe, unigram", o.type);
  VS_USER_CHECK(
      o.vocab_size >= 260 && o.vocab_size <= (int64_t{1} << 31) - 1,
      "tokenizer train: --vocab-size {} must be in [260, 2^31 - 1] (at least the 256 byte "
      "pieces of byte fallback, the unknown, begin and end pieces, and the text's "
      "characters)",
      o.vocab_size);
  std::set<std::string> seen;
  for (const auto& t : o.special_tokens) {
    VS_USER_CHECK(!t.empty() && t.find(',') == std::string::npos,
                  "tokenizer train: --special '{}' must be non-empty and hold no comma", t);
    VS_USER_CHECK(seen.insert(t).second, "tokenizer train: --special '{}' is given twice", t);
    VS_USER_CHECK(!is_own_piece(t),
                  "tokenizer train: --special '{}' is one of the model's own pieces (<unk>, <s>, "
                  "</s> and the byte pieces <0x00>..<0xFF>)",
                  t);
  }
  VS_USER_CHECK(!o.output.empty(), "tokenizer train: -o MODEL names the model file to write");
  for (const auto& f : o.files) {
    require_regular_file(f, "tokenizer train: text file");
    VS_USER_CHECK(f.find(',') == std::string::npos,
                  "tokenizer train: {}: SentencePiece's trainer takes no file name with a comma "
                  "(rename or link it)",
                  f);
  }
  refuse_writing_over_inputs(o.output, o.files, "tokenizer train");
  VS_USER_CHECK(o.overwrite || !path_taken(o.output),
                "tokenizer train: -o {} exists; pass --overwrite to replace it", o.output);
  std::error_code ec;
  VS_USER_CHECK(!std::filesystem::is_directory(o.output, ec),
                "tokenizer train: -o {} is a folder; name the model file to write", o.output);
}

}  // namespace

std::string train_sentencepiece(const TokenizerTrainOptions& o) {
  check_options(o);
  const std::string files = fmt::format("{}", fmt::join(o.files, ", "));
  TextScan scan;
  for (const auto& f : o.files)
    scan_text(f, &scan);
  VS_USER_CHECK(scan.bytes > 0, "tokenizer train: {} hold no text", files);
  VS_USER_CHECK(scan.lines > scan.long_lines,
                "tokenizer train: {} holds no line to train on: {} of its {} lines are longer than "
                "{} bytes, the most the trainer takes a line (split them, e.g. at sentences)",
                files, scan.long_lines, scan.lines, kMaxLineBytes);
  if (scan.long_lines > 0)
    spdlog::warn(
        "[tokenizer] {} of the {} lines of {} are longer than {} bytes and are left out of "
        "training (the most the trainer takes a line; split them, e.g. at sentences)",
        scan.long_lines, scan.lines, files, kMaxLineBytes);
  // Lossless: no normalisation, whitespace as it is, bytes for what the pieces do not cover.
  const std::unordered_map<std::string, std::string> args = {
      {"input", fmt::format("{}", fmt::join(o.files, ","))},
      {"model_type", o.type},
      {"vocab_size", std::to_string(o.vocab_size)},
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "false"},
      {"byte_fallback", "true"},
      {"allow_whitespace_only_pieces", "true"},
      {"character_coverage", "1.0"},
      {"max_sentence_length", std::to_string(kMaxLineBytes)},
      {"num_threads", std::to_string(std::max(1, o.threads))},
      {"user_defined_symbols", fmt::format("{}", fmt::join(o.special_tokens, ","))},
      {"minloglevel", "2"},
  };
  const SentencePieceApi* api = require_sentencepiece_plugin("tokenizer train");
  const auto start = std::chrono::steady_clock::now();
  std::string model, error;
  VS_USER_CHECK(api->train(args, &model, &error), "{}", in_our_words(error, o, files));
  // Written whole or not at all.
  const std::string tmp = o.output + ".partial";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    VS_USER_CHECK(out.good(), "tokenizer train: cannot write {}", tmp);
    out.write(model.data(), static_cast<std::streamsize>(model.size()));
    out.close();
    if (!out.good()) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      throw UserError(fmt::format("tokenizer train: writing {} failed", tmp));
    }
  }
  std::filesystem::rename(tmp, o.output);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto tokenizer = open_sentencepiece(o.output);
  return fmt::format(
      "wrote {}: SentencePiece {} model, {} pieces, trained on {} bytes of {} file{} "
      "in {:.1f}s; {}",
      o.output, o.type, tokenizer->vocab_size(), scan.bytes, o.files.size(),
      o.files.size() == 1 ? "" : "s", seconds, tokenizer->identity());
}

}  // namespace vescale
