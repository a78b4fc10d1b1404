// `vescale-train data prepare FILES... --tokenizer PATH -o DIR` (NOTE [Token files]).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "commands.h"
#include "commands/validators.h"
#include "core/logging.h"
#include "core/units.h"
#include "data/prepare_tokens.h"

namespace vescale::app {

void add_data_command(CLI::App& app, const Invocation& /*invocation*/) {
  auto o = std::make_shared<PrepareOptions>();
  o->threads = 0;  // the cores, unless --threads
  CLI::App* data = app.add_subcommand("data", "Prepare training data");
  data->require_subcommand(1);
  CLI::App* prepare = data->add_subcommand(
      "prepare",
      "Tokenize text files and JSON-lines corpora (.jsonl, .jsonl.gz, .jsonl.zst: one document a "
      "line, --field of each JSON object) into train.bin, val.bin and meta.json for data.source "
      "= \"tokens\": each text file or line one document (its tokens, then the end-of-text token "
      "where the tokenizer has one), in the order given; the last --val-fraction of the tokens "
      "is val.bin. With --sft the lines are fine-tuning examples ({\"prompt\", \"response\"} or "
      "{\"messages\": [...]}) rendered by --template, and a loss mask is written beside the "
      "tokens. Files stream in 1 MB chunks; a bad line stops it with its file:line and nothing "
      "written");
  prepare
      ->add_option("files", o->files,
                   "Text or JSON-lines files (gzip and zstd decompressed, told by their first "
                   "bytes; bzip2, xz, lz4, zip and 7z refused)")
      ->required();
  prepare
      ->add_option("--tokenizer", o->tokenizer,
                   "\"bytes\", a SentencePiece model file (tokenizer train), a Hugging Face "
                   "tokenizer.json (byte-level BPE), or a folder holding one")
      ->default_val("bytes");
  prepare->add_option("-o,--output", o->output, "The folder to write")->required();
  prepare->add_option("--val-fraction", o->val_fraction, "The share of tokens in val.bin")
      ->default_val(0.05);
  prepare->add_option("--threads", o->threads, "Encoding threads (default: the cores)")
      ->check(whole_in(1, 1024));
  prepare
      ->add_option("--format", o->format,
                   "auto (JSON lines for names ending .jsonl, in any case, or .jsonl and a "
                   "compression's ending such as .jsonl.gz; else text), text or jsonl, for every "
                   "file")
      ->check(CLI::IsMember({"auto", "text", "jsonl"}))
      ->default_val("auto");
  prepare->add_option("--field", o->field, "JSON lines: the field holding each document's text")
      ->default_val("text");
  prepare->add_flag("--skip-bad-lines", o->skip_bad_lines,
                    "Count JSON lines that are not JSON, lack the field or hold no string there "
                    "(and a truncated compressed file's cut line), report them and go on");
  prepare->add_flag("--sft", o->sft,
                    "The JSON lines are supervised fine-tuning examples: also write "
                    "train.mask.bin and val.mask.bin (1 on the assistant's tokens) and where each "
                    "example starts");
  prepare->add_flag("--overwrite", o->overwrite,
                    "Replace token files in -o that no data prepare wrote (train.bin or val.bin "
                    "without our meta.json beside them, as a nanoGPT folder)");
  prepare->add_option("--template", o->chat_template,
                      "--sft: the chat template (TOML: the strings before and after each role's "
                      "content; configs/templates/)");
  prepare->callback([o, prepare] {
    if (prepare->count("--field") > 0) {  // a field read from nothing is a mistake to say
      VS_USER_CHECK(!o->sft,
                    "data prepare --field {}: --sft reads each example's \"prompt\" and "
                    "\"response\" or \"messages\", never --field; leave it out",
                    o->field);
      VS_USER_CHECK(
          std::any_of(o->files.begin(), o->files.end(),
                      [&](const std::string& f) { return reads_json_lines(f, o->format); }),
          "data prepare --field {}: no input is read as JSON lines (each is text by its "
          "name); --field names a JSON field: leave it out, or give --format jsonl",
          o->field);
    }
    if (o->threads <= 0)
      o->threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const PrepareSummary s =
        prepare_tokens(*o, [](const std::string& line) { spdlog::info("{}", line); });
    const int64_t tokens = s.train_tokens + s.val_tokens;
    std::string extra;
    if (o->sft) extra += fmt::format("; {} of the tokens trained on (the mask)", s.trained_tokens);
    if (s.bad_lines > 0)
      extra += fmt::format("; skipped {} bad line{} (the first: {})", s.bad_lines,
                           s.bad_lines == 1 ? "" : "s", s.first_bad_line);
    std::printf(
        "%s\n",
        fmt::format("wrote {}: {} {} in {} chunks, {} read ({} in the files) -> {} tokens "
                    "({:.2f} bytes a token; {} train, {} val, {}, vocab {}) in {:.1f}s, {:.1f} "
                    "MB/s on {} thread{}; tokenizer {}{}",
                    o->output, s.documents, o->sft ? "examples" : "documents", s.chunks,
                    format_bytes(static_cast<double>(s.text_bytes)),
                    format_bytes(static_cast<double>(s.bytes)), tokens,
                    static_cast<double>(s.text_bytes) / static_cast<double>(tokens), s.train_tokens,
                    s.val_tokens, s.dtype, s.vocab_size, s.seconds,
                    static_cast<double>(s.text_bytes) / 1e6 / s.seconds, o->threads,
                    o->threads == 1 ? "" : "s", s.tokenizer, extra)
            .c_str());
  });
}

}  // namespace vescale::app
