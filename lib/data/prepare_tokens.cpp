// `data prepare`: the inputs checked, then the streaming encode (data/streaming_encoder.h) into
// partial files of the output folder, the val split and the commit (data/prepare_output.h).
#include "data/prepare_tokens.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include "core/error.h"
#include "core/input_file.h"
#include "data/byte_source.h"
#include "data/chat_template.h"
#include "data/prepare_output.h"
#include "data/streaming_encoder.h"
#include "tokenize/tokenizer.h"

namespace vescale {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using detail::OutputFolder;
using detail::PartialsOnStopSignal;
using detail::RemovePartials;
using detail::SplitFiles;

/// The corpus's bytes, after checking the options and the files.
int64_t check_prepare_inputs(const PrepareOptions& o) {
  VS_USER_CHECK(!o.files.empty(), "data prepare: name at least one text or JSON-lines file");
  VS_USER_CHECK(o.val_fraction > 0 && o.val_fraction < 1,
                "data prepare: --val-fraction {} must be in (0, 1)", o.val_fraction);
  VS_USER_CHECK(!o.output.empty(), "data prepare: -o DIR names the folder to write");
  VS_USER_CHECK(o.format == "auto" || o.format == "text" || o.format == "jsonl",
                "data prepare: --format {} is not auto, text or jsonl", o.format);
  VS_USER_CHECK(!o.field.empty(), "data prepare: --field is empty; name the documents' field");
  VS_USER_CHECK(!o.tokenizer.empty(),
                "data prepare: --tokenizer is empty; name \"bytes\", a SentencePiece model, a "
                "Hugging Face tokenizer.json or a folder holding one");
  VS_USER_CHECK(!o.sft || !o.chat_template.empty(),
                "data prepare: --sft renders examples with a chat template: give --template FILE "
                "(configs/templates/ has Llama 3's and ChatML)");
  VS_USER_CHECK(o.sft || o.chat_template.empty(),
                "data prepare: --template {} renders fine-tuning examples: add --sft",
                o.chat_template);
  int64_t corpus = 0;
  for (const auto& f : o.files) {
    require_regular_file(f, "data prepare: input file");
    compression_of(f, "data prepare");  // NOTE [Compressed input]: refused before any output
    VS_USER_CHECK(!o.sft || reads_json_lines(f, o.format),
                  "data prepare: --sft reads JSON lines, and {} is read as text (name it .jsonl, "
                  ".jsonl.gz or .jsonl.zst, or give --format jsonl)",
                  f);
    corpus += static_cast<int64_t>(fs::file_size(f));
  }
  VS_USER_CHECK(corpus > 0, "data prepare: {} hold{} no text", fmt::join(o.files, ", "),
                o.files.size() == 1 ? "s" : "");
  return corpus;
}

}  // namespace

bool reads_json_lines(const std::string& path, const std::string& format) {
  if (format != "auto") return format == "jsonl";
  return stem_ends_with(path, ".jsonl");  // x.JSONL, x.jsonl.gz
}

PrepareSummary prepare_tokens(const PrepareOptions& o,
                              const std::function<void(const std::string&)>& progress) {
  const int64_t corpus = check_prepare_inputs(o);
  const std::unique_ptr<Tokenizer> tokenizer = open_tokenizer(o.tokenizer);
  const std::optional<ChatTemplate> chat =
      o.sft ? std::optional(ChatTemplate::load(o.chat_template)) : std::nullopt;
  const bool wide = tokenizer->vocab_size() > 65536;
  OutputFolder output(o);
  const fs::path& folder = output.path();
  RemovePartials partials;
  for (const std::string& name : detail::output_names(true))
    partials.paths.push_back(detail::partial_path(folder, name));
  partials.paths.push_back(detail::partial_path(folder, "meta.json"));
  SplitFiles out;
  const auto open = [&](std::ofstream& f, const char* name) {
    const fs::path path = detail::partial_path(folder, name);
    f.open(path, std::ios::binary | std::ios::trunc);
    VS_USER_CHECK(f.good(), "data prepare: cannot write {}: {}", path.string(),
                  std::strerror(errno));
  };
  open(out.tokens, "train.bin");
  if (o.sft) {
    open(out.mask, "train.mask.bin");
    open(out.starts, "train.docs.bin");
  }
  const auto start = Clock::now();
  std::optional<PartialsOnStopSignal> on_stop(std::in_place, partials.paths);
  const detail::EncodedTotals totals =
      detail::encode_files(o, *tokenizer, chat ? &*chat : nullptr, corpus, progress, out, wide);
  for (const auto& [f, name] : {std::pair{&out.tokens, "train.bin"},
                                {&out.mask, "train.mask.bin"},
                                {&out.starts, "train.docs.bin"}}) {
    if (!f->is_open()) continue;
    f->close();
    VS_USER_CHECK(f->good(), "data prepare: writing {} failed: {}",
                  detail::partial_path(folder, name).string(), std::strerror(errno));
  }

  PrepareSummary sum;
  sum.bytes = corpus;
  detail::split_outputs(folder, o, totals, wide, sum);
  on_stop.reset();
  sum.vocab_size = tokenizer->vocab_size();
  sum.dtype = wide ? "uint32" : "uint16";
  sum.tokenizer = tokenizer->identity();
  detail::commit_token_files(
      folder, detail::token_meta(sum, o, *tokenizer, chat ? &*chat : nullptr), o.sft, partials);
  output.keep();
  sum.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return sum;
}

}  // namespace vescale
