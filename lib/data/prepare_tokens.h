// `data prepare`: text files and JSON-lines corpora to token files the "tokens" source reads
// (NOTE [Token files]).
//
// NOTE [Token files]
// Each text file is one document, and so is each line of a JSON-lines file (NOTE [JSON-lines
// corpora]): its tokens are the tokenizer's document start where it has
// one (a BOS, NOTE [Document start]), its encoding of the whole file, then the end-of-text token
// where it has one; documents follow in the order given. The stream's last `val_fraction` is
// val.bin, the rest train.bin, flat little-endian uint16 (nanoGPT's) or uint32 where the
// vocabulary needs more than 16 bits. meta.json declares the vocabulary, the width, the
// tokenizer's identity (tokenize/tokenizer.h), its document start and end-of-text ids; the
// "tokens" source reads the first two. A reader cuts the files into chunks of about 1 MB where the
// tokenizer can cut (Tokenizer::stable_prefix: anywhere for bytes, before a space for SentencePiece
// BPE models, between pre-tokens for byte-level BPE), workers encode the chunks, and they are
// written in order, at most 2 x threads of them in memory at once: memory stays bounded whatever
// the size of the corpus or of one file, save a stretch with no place to cut (a tokenizer that
// knows none encodes each file whole). Where no cut is found the reader reads on and asks again
// at twice the size, so a long stretch costs linear time. Everything is written under .partial
// names (removed again if the command fails) and renamed at the end: meta.json.partial is
// written first and stays until the last rename, the old meta.json is removed before the .bin
// files are renamed, and the new one comes last. The "tokens" source refuses a folder that holds
// meta.json.partial (a prepare stopped midway) or whose .bin files do not hold the token counts
// meta.json says. No output may be one of the inputs (the text files, the tokenizer).
// Under --sft each line is a fine-tuning example (NOTE [Chat template]) and two more files go
// beside each .bin, split where it is: <split>.mask.bin, a byte a token (1: the token is trained
// on), and <split>.docs.bin, where each example starts (uint64 token offsets, for data.sft_pack =
// false); meta.json says "mask": true.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace vescale {

struct PrepareOptions {
  std::vector<std::string> files;
  std::string tokenizer = "bytes";  ///< tokenize/tokenizer.h: "bytes" or a model file
  std::string output;               ///< the folder written
  double val_fraction = 0.05;
  int threads = 1;
  /// "auto": JSON lines for names ending in .jsonl (.jsonl.gz, .jsonl.zst), else text; "text" or
  /// "jsonl" for every file (NOTE [JSON-lines corpora]).
  std::string format = "auto";
  std::string field = "text";   ///< JSON lines: the documents' field
  bool skip_bad_lines = false;  ///< count bad JSON lines and go on, instead of stopping
  bool sft = false;             ///< JSON lines are fine-tuning examples (NOTE [Chat template])
  std::string chat_template;    ///< --sft: the template file
  /// Replace token files in `output` that no prepare of ours wrote (NOTE [Foreign outputs]).
  bool overwrite = false;
};

struct PrepareSummary {
  int64_t documents = 0, chunks = 0, bytes = 0, train_tokens = 0, val_tokens = 0, vocab_size = 0;
  int64_t text_bytes = 0;      ///< decompressed
  int64_t bad_lines = 0;       ///< JSON lines skipped (--skip-bad-lines)
  std::string first_bad_line;  ///< "file:line: why" of the first
  int64_t trained_tokens = 0;  ///< --sft: tokens the mask trains on, train and val
  std::string dtype, tokenizer;
  double seconds = 0;
};

/// Whether `path` is read as JSON lines under `format` ("auto", "text" or "jsonl").
bool reads_json_lines(const std::string& path, const std::string& format);

/// Writes output/train.bin, val.bin and meta.json (under --sft also train.mask.bin, val.mask.bin,
/// train.docs.bin and val.docs.bin); `progress` gets a line every few seconds. Throws UserError
/// on bad input (a missing file, a file that is not UTF-8 where the tokenizer reads UTF-8, a bad
/// JSON line or compressed stream, an empty corpus, too few tokens to split), and then leaves
/// the folder as it was.
PrepareSummary prepare_tokens(const PrepareOptions& options,
                              const std::function<void(const std::string&)>& progress);

}  // namespace vescale
