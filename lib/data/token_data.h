// Token streams for GPT: the bytes of a text file, nanoGPT-style uint16 .bin files, or a
// synthetic learnable sequence; with batches that are a pure function of (seed, step), so every
// layout sees the same samples and a resume continues exactly. Files are memory-mapped shared and
// read-only (data/file_map.h) and held in their own width (uint8 text, uint16 tokens): only the
// windows of a batch are widened to int64, so a file of any size costs no memory up front.
//
// NOTE [Host data]
// Every tensor data/ returns is on the CPU: it is filled through host pointers (files, memory
// maps, the counter-based generator). The caller moves a batch to the rank's device.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace vescale {

class FileMap;  // data/file_map.h

/// A read-only array of token ids.
class TokenArray {
 public:
  virtual ~TokenArray() = default;
  virtual int64_t size() const = 0;
  /// Widens tokens [begin, begin + count) into `out` (count int64s); a token outside the
  /// vocabulary is a UserError naming the file (NOTE [Vocabulary check]).
  virtual void copy_to(int64_t begin, int64_t count, int64_t* out) const = 0;
  /// tokens [begin, begin + count) as int64, on the CPU.
  at::Tensor slice(int64_t begin, int64_t count) const;
};

// NOTE [Loss masks]
// Fine-tuning data (`data prepare --sft`, NOTE [Chat template]) has beside each split's tokens a
// byte a token, 1 where the loss trains on the token, and where each example starts. A batch's
// targets are kIgnoreTarget where the mask is 0 (the prompts), and the loss averages over the
// trained targets of the whole global batch: each micro-batch's loss is the sum over its trained
// targets divided by N / (R M), N the global batch's trained targets, R the data ranks the
// gradients are averaged over (dp x cp) and M the micro-batches, so the average over the ranks
// and micro-batches is the sum over the global batch over N, whatever the layout or the number
// of micro-batches. N comes from the masks of every row of the batch, read on each rank (a byte
// a token: no collective). Evaluation divides the same way by the trained targets of all its
// windows. Rows are windows at seeded positions of the packed stream, as for any tokens
// (data.sft_pack = true), or each one example from its start, padded with untrained tokens past
// its end and cut at seq_len + 1 (data.sft_pack = false); validation then takes the val split's
// examples in order. A global batch without a trained target has loss 0.
/// A split's loss mask: a byte a token (data prepare --sft), memory-mapped.
class TokenMask {
 public:
  explicit TokenMask(const std::string& path);
  int64_t size() const { return size_; }
  /// The mask of tokens [begin, begin + count) into `out`, 1 where trained.
  void copy_to(int64_t begin, int64_t count, uint8_t* out) const;
  /// How many of tokens [begin, begin + count) are trained.
  int64_t trained(int64_t begin, int64_t count) const;

 private:
  std::shared_ptr<const FileMap> map_;
  int64_t size_ = 0;
};

struct TokenData {
  std::shared_ptr<TokenArray> train, val;
  int64_t vocab_size = 256;  ///< the vocabulary the model needs for this data
  std::string description;
  /// Fine-tuning data (NOTE [Loss masks]): each split's mask and where its examples start; null
  /// and empty for data every token of which is trained on.
  std::shared_ptr<const TokenMask> train_mask, val_mask;
  std::vector<int64_t> train_starts, val_starts;
};

/// One row of a batch: the seq_len + 1 tokens from `start`, of which the first `tokens` are
/// data (an example's, when fewer) and the rest padding.
struct RowWindow {
  int64_t start = 0;
  int64_t tokens = 0;
};

/// data.source = "text": UTF-8 bytes are tokens (vocab 256); the last `val_fraction` is val.
/// The file is mapped once; train and val are views of its bytes.
TokenData load_text_tokens(const std::string& path, double val_fraction);

// NOTE [Vocabulary check]
// data.source = "tokens" takes its vocabulary from model.vocab_size, checked against the data
// without a full pass over a possibly huge file: by `meta.json` in the folder if present (a JSON
// object whose "vocab_size" must be <= model.vocab_size), else by a bounded scan of each file
// (its first kScanHeadTokens tokens and kScanChunks chunks of kScanChunkTokens spread evenly over
// the rest: at most ~6 MB read per file). Every batch and validation window is checked again as
// it is widened, so a token the scan missed fails with the same UserError at the step that reads
// it, never as an out-of-range embedding lookup.
inline constexpr int64_t kScanHeadTokens = 1 << 20;
inline constexpr int64_t kScanChunks = 32;
inline constexpr int64_t kScanChunkTokens = 1 << 16;

/// What a tokens folder's `meta.json` declares: its vocabulary (0 if the folder has none), the
/// token width, "uint16" (nanoGPT's, the default) or "uint32" (`data prepare` for vocabularies
/// over 65,536), and what `data prepare` wrote beside them.
struct TokenMeta {
  int64_t vocab_size = 0;
  std::string dtype = "uint16";
  int64_t train_tokens = -1;  ///< -1: not said
  int64_t val_tokens = -1;
  std::string tokenizer;       ///< the tokenizer's identity (tokenize/tokenizer.h); "": not said
  std::string tokenizer_path;  ///< as data prepare was given it; "": not said
  bool mask = false;           ///< a loss mask and example starts beside the tokens (--sft)
  std::string chat_template;   ///< --sft: the template file as data prepare was given it
  /// --sft: the template's strings ("user.before": ...); empty: not said (an older prepare)
  std::map<std::string, std::string> chat_template_strings;
};
/// `folder`/meta.json read and checked (a UserError naming it); the defaults without one.
TokenMeta read_token_meta(const std::filesystem::path& folder);

/// data.source = "tokens": `folder`/train.bin and val.bin, flat uint16 (memory-mapped), for a
/// model of `vocab_size` tokens (NOTE [Vocabulary check]).
TokenData load_bin_tokens(const std::string& folder, int64_t vocab_size);
/// data.source = "synthetic": a learnable stream (each token is 5 x the previous + 3, mod
/// vocab, with a seeded 10% chance of +1), 1M train and 64K val tokens.
TokenData synthetic_tokens(int64_t vocab_size, uint64_t seed);

/// Which rows of a step's global batch a rank's micro-batch holds.
struct BatchSlice {
  int64_t global_rows;  ///< global batch size
  int64_t row_offset;   ///< first row of this micro-batch in the global batch
  int64_t rows;         ///< rows in this micro-batch
};
/// Rows of dp rank `dp_rank` (of `dp`), micro-batch `micro` (of `microbatches`): contiguous.
BatchSlice batch_slice(int64_t global_rows, int64_t dp, int64_t dp_rank, int64_t microbatches,
                       int64_t micro);

/// Inputs [rows, seq_len] and targets (the next tokens) of a slice of step `step`'s global batch:
/// row i starts at a position drawn from (seed, step, i) in the train split.
std::pair<at::Tensor, at::Tensor> token_batch(const TokenArray& train, uint64_t seed, int64_t step,
                                              int64_t seq_len, const BatchSlice& slice);

/// The rows of a slice of step `step`'s global batch (NOTE [Loss masks]): windows at positions
/// drawn from (seed, step, i) of `tokens`, or with `starts` (data.sft_pack = false) each the
/// example drawn so, from its start.
std::vector<RowWindow> batch_windows(int64_t tokens, const std::vector<int64_t>& starts,
                                     bool examples, uint64_t seed, int64_t step, int64_t seq_len,
                                     const BatchSlice& slice);
/// The inputs and targets of `rows` of `data`: targets kIgnoreTarget where `mask` (if any) is 0
/// and past a row's tokens, inputs 0 there.
std::pair<at::Tensor, at::Tensor> window_batch(const TokenArray& data, const TokenMask* mask,
                                               const std::vector<RowWindow>& rows, int64_t seq_len);
/// How many targets of `rows` `mask` trains on.
int64_t trained_targets(const TokenMask& mask, const std::vector<RowWindow>& rows);

/// Validation window w: tokens [w*T, w*T + T] of the val split (inputs and targets); how many fit.
std::pair<at::Tensor, at::Tensor> val_window(const TokenArray& val, int64_t window,
                                             int64_t seq_len);
int64_t val_windows_available(const TokenArray& val, int64_t seq_len);
/// Validation window w's row: tokens [w*T, w*T + T], or with `starts` the w-th example's.
RowWindow val_row(const TokenArray& val, const std::vector<int64_t>& starts, bool examples,
                  int64_t window, int64_t seq_len);
/// How many validation windows there are: windows of the split, or its examples.
int64_t val_rows_available(const TokenArray& val, const std::vector<int64_t>& starts, bool examples,
                           int64_t seq_len);

}  // namespace vescale
