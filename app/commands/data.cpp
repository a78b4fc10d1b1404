// `vescale-train data prepare FILES... --tokenizer PATH -o DIR` (NOTE [Token files]).
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
      "Tokenize text files into train.bin, val.bin and meta.json for data.source = \"tokens\": "
      "each file one document (its tokens, then the end-of-text token where the tokenizer has "
      "one), in the order given; the last --val-fraction of the tokens is val.bin. Files stream "
      "in 1 MB chunks cut where the tokenizer can");
  prepare->add_option("files", o->files, "Text files")->required();
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
  prepare->callback([o] {
    if (o->threads <= 0)
      o->threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const PrepareSummary s =
        prepare_tokens(*o, [](const std::string& line) { spdlog::info("{}", line); });
    const int64_t tokens = s.train_tokens + s.val_tokens;
    std::printf(
        "%s\n",
        fmt::format("wrote {}: {} documents in {} chunks, {} -> {} tokens ({:.2f} bytes a "
                    "token; {} train, {} val, {}, vocab {}) in {:.1f}s, {:.1f} MB/s on {} "
                    "thread{}; tokenizer {}",
                    o->output, s.documents, s.chunks, format_bytes(static_cast<double>(s.bytes)),
                    tokens, static_cast<double>(s.bytes) / static_cast<double>(tokens),
                    s.train_tokens, s.val_tokens, s.dtype, s.vocab_size, s.seconds,
                    static_cast<double>(s.bytes) / 1e6 / s.seconds, o->threads,
                    o->threads == 1 ? "" : "s", s.tokenizer)
            .c_str());
  });
}

}  // namespace vescale::app
