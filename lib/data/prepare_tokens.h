// `data prepare`: text files to token files the "tokens" source reads (NOTE [Token files]).
//
// NOTE [Token files]
// Each input file is one document: its tokens are the tokenizer's document start where it has
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
};

struct PrepareSummary {
  int64_t documents = 0, chunks = 0, bytes = 0, train_tokens = 0, val_tokens = 0, vocab_size = 0;
  std::string dtype, tokenizer;
  double seconds = 0;
};

/// Writes output/train.bin, val.bin and meta.json; `progress` gets a line every few seconds.
/// Throws UserError on bad input (a missing file, a file that is not UTF-8 where the tokenizer
/// reads UTF-8, an empty corpus, too few tokens to split).
PrepareSummary prepare_tokens(const PrepareOptions& options,
                              const std::function<void(const std::string&)>& progress);

}  // namespace vescale
