// `vescale-train tokenizer train | encode | decode` (NOTE [Tokenizers]).
#include <charconv>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.h"
#include "commands/validators.h"
#include "core/error.h"
#include "core/input_file.h"
#include "tokenize/tokenizer.h"

namespace vescale::app {
namespace {

struct TokenizerOptions {
  TokenizerTrainOptions train;
  std::string tokenizer;
  std::string file;
  std::string text;
  std::vector<std::string> ids;  ///< as written: a number CLI11 would clamp is named as given
};

/// decode's ids as integers, or one line naming the one that is none as it was written.
std::vector<int64_t> parse_ids(const std::vector<std::string>& texts, int64_t vocab) {
  std::vector<int64_t> out;
  for (const std::string& text : texts) {
    int64_t id = -1;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), id);
    // One that parses is the tokenizer's to judge (its message names its vocabulary).
    VS_USER_CHECK(error == std::errc() && end == text.data() + text.size(),
                  "tokenizer decode: '{}' is not a token id of this tokenizer: use whole numbers "
                  "from 0 to {}",
                  text, vocab - 1);
    out.push_back(id);
  }
  return out;
}

/// The text `encode` reads: --text, or the whole file.
std::string input_text(const TokenizerOptions& o) {
  VS_USER_CHECK(o.file.empty() != o.text.empty(),
                "tokenizer encode: give either a FILE or --text TEXT");
  if (!o.text.empty()) return o.text;
  return read_input_file(o.file, "text file", int64_t{1} << 30);
}

}  // namespace

constexpr const char* kTokenizerHelp =
    "\"bytes\", a SentencePiece model file, a Hugging Face tokenizer.json (byte-level BPE), or "
    "a folder holding tokenizer.json or tokenizer.model";

void add_tokenizer_command(CLI::App& app, const Invocation& /*invocation*/) {
  auto o = std::make_shared<TokenizerOptions>();
  o->train.threads = 0;  // the cores, unless --threads
  CLI::App* tokenizer =
      app.add_subcommand("tokenizer",
                         "Train SentencePiece tokenizers, and encode or decode text with them, "
                         "Hugging Face byte-level BPE tokenizer.json files or bytes");
  tokenizer->require_subcommand(1);

  CLI::App* train = tokenizer->add_subcommand(
      "train",
      "Train a SentencePiece model on text files (one sentence a line) with the library's own "
      "trainer: no normalisation, whitespace kept, byte fallback, so decoding gives the text back "
      "byte for byte");
  train->add_option("files", o->train.files, "Text files")->required();
  train->add_option("--vocab-size", o->train.vocab_size, "Pieces in the vocabulary")
      ->default_val(8000);
  train->add_option("--type", o->train.type, "bpe or unigram")->default_val("bpe");
  train->add_option("--special", o->train.special_tokens,
                    "A token kept whole (e.g. <|endoftext|>); repeat for more");
  train->add_option("-o,--output", o->train.output, "The model file to write")->required();
  train->add_flag("--overwrite", o->train.overwrite, "Replace the model file if it exists");
  train->add_option("--threads", o->train.threads, "Trainer threads (default: the cores)")
      ->check(whole_in(1, 1024));
  train->callback([o] {
    if (o->train.threads <= 0)
      o->train.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    std::printf("%s\n", train_sentencepiece(o->train).c_str());
  });

  CLI::App* encode = tokenizer->add_subcommand(
      "encode",
      "Print the token ids of a text file (or --text) on one line, space-separated: the text's "
      "ids alone, without the BOS data prepare and generate begin a text with");
  encode->add_option("--tokenizer", o->tokenizer, kTokenizerHelp)->required();
  encode->add_option("file", o->file, "Text file (its whole contents)");
  encode->add_option("--text", o->text, "The text itself");
  encode->callback([o] {
    const auto t = open_tokenizer(o->tokenizer);
    const std::vector<int64_t> ids = t->encode(input_text(*o));
    std::printf("%s\n", fmt::format("{}", fmt::join(ids, " ")).c_str());
  });

  CLI::App* decode =
      tokenizer->add_subcommand("decode", "Print the text of token ids (written as it decodes)");
  decode->add_option("--tokenizer", o->tokenizer, kTokenizerHelp)->required();
  decode->add_option("ids", o->ids, "Token ids")->required();
  decode->callback([o] {
    const std::unique_ptr<Tokenizer> t = open_tokenizer(o->tokenizer);
    const std::string text = t->decode(parse_ids(o->ids, t->vocab_size()));
    std::fwrite(text.data(), 1, text.size(), stdout);
  });
}

}  // namespace vescale::app
