// Tokenizers: text to token ids and back, behind one small interface (NOTE [Tokenizers]).
//
// NOTE [Tokenizers]
// A tokenizer is named by a path (data.tokenizer, --tokenizer): "bytes" (each byte its id, the
// default text source's), a SentencePiece model file (`tokenizer.model`, as Llama 1/2 ship and
// as `tokenizer train` writes), a Hugging Face tokenizer.json of the byte-level BPE kind (NOTE
// [Byte-level BPE]), or a folder holding one of the last two (tokenizer.json first). Each gives
// encode, decode, its vocabulary size, its end-of-text id (where it has one) and an identity: its
// kind and the CRC-32C of its file, which token files record (meta.json) so that a job can tell
// tokens of another tokenizer.
//
// NOTE [Document start]
// Some tokenizers begin every text with special tokens, as Hugging Face encodes with
// add_special_tokens=True: Llama 3's tokenizer.json has a TemplateProcessing post-processor that
// puts <|begin_of_text|> before the text, Llama 2's tokenizer_config.json sets add_bos_token with
// bos_token "<s>"; a model trained so reads text without them worse. document_start() is those
// ids: the special tokens a tokenizer.json's template puts before the text ($A), its
// post-processor a TemplateProcessing or a Sequence holding one; else, for tokenizer.json and
// SentencePiece models alike, tokenizer_config.json's bos_token where its add_bos_token is true;
// else none. `data prepare` begins each document with them (and ends it with the end-of-text token
// as before), `generate` each text prompt (not --prompt-ids), and prints the text after them;
// `tokenizer encode` gives the text's ids alone (add_special_tokens=False). Tokens a template puts
// after the text are not added: a document ends with end-of-text.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace vescale {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  /// The ids of `text`, as the tokenizer's own library encodes it.
  virtual std::vector<int64_t> encode(std::string_view text) const = 0;
  /// The text of `ids`; throws UserError naming an id outside the vocabulary.
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  virtual int64_t vocab_size() const = 0;
  /// The id that ends a document, where the tokenizer has one.
  virtual std::optional<int64_t> end_of_text() const = 0;
  /// The ids a text begins with (NOTE [Document start]): Llama's BOS; none for most.
  virtual std::vector<int64_t> document_start() const { return {}; }
  /// "bytes", or "sentencepiece crc32c:<hex of the model file>".
  virtual std::string identity() const = 0;
  /// decode(encode(x)) == x for every byte string x.
  virtual bool lossless() const = 0;
  /// A length p such that encode(text[:p] + rest) == encode(text[:p]) + encode(rest) for every
  /// rest that begins with text[p:]: how much of a long file can be encoded before the rest is
  /// read (`data prepare` streams so). 0 where the tokenizer knows no such place in `text`.
  virtual size_t stable_prefix(std::string_view text) const = 0;
  /// Bytes of memory encode() takes per byte of the text it encodes at once, where that is much
  /// (SentencePiece: ~220, measured), else 0: `data prepare` refuses a stretch it cannot cut that
  /// would not fit in memory.
  virtual double encode_memory_per_byte() const { return 0; }
};

/// The tokenizer `path` names: "bytes", a SentencePiece model file, a tokenizer.json, or a folder
/// holding tokenizer.json or tokenizer.model. Throws UserError naming the path and what would be
/// valid.
std::unique_ptr<Tokenizer> open_tokenizer(const std::string& path);

/// How `tokenizer train` trains a SentencePiece model.
struct TokenizerTrainOptions {
  std::vector<std::string> files;  ///< text, one sentence a line
  int64_t vocab_size = 8000;
  std::string type = "bpe";                 ///< "bpe" or "unigram"
  std::vector<std::string> special_tokens;  ///< whole pieces, never split
  std::string output;                       ///< the model file written
  bool overwrite = false;                   ///< replace an existing `output`
  int threads = 1;
};

/// Trains a SentencePiece model on the files and writes it to options.output (the library's own
/// trainer; identity normalization, whitespace kept, byte fallback: lossless). Returns a one-line
/// summary. Throws UserError on bad input.
std::string train_sentencepiece(const TokenizerTrainOptions& options);

}  // namespace vescale
