#include "data/token_data.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <tuple>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "core/ignore_target.h"
#include "core/input_file.h"
#include "data/file_map.h"
#include "dtensor/random.h"

namespace vescale {
namespace {

/// Token tensors are filled through host pointers (NOTE [Host data]).
at::TensorOptions host_long() {
  return at::dtype(at::kLong).device(kCpu);
}

void check_range(const TokenArray& a, int64_t begin, int64_t count) {
  VS_CHECK(begin >= 0 && count >= 0 && begin + count <= a.size(),
           "[data] tokens [{}, {}) out of range of {}", begin, begin + count, a.size());
}

/// Tokens held in memory as int64 (the synthetic task).
class MemoryTokens : public TokenArray {
 public:
  explicit MemoryTokens(at::Tensor tokens) : tokens_(std::move(tokens)) {}
  int64_t size() const override { return tokens_.numel(); }
  void copy_to(int64_t begin, int64_t count, int64_t* out) const override {
    check_range(*this, begin, count);
    std::memcpy(out, tokens_.data_ptr<int64_t>() + begin, static_cast<size_t>(count) * 8);
  }

 private:
  at::Tensor tokens_;
};

/// Tokens of type T (uint8 text bytes, uint16 token ids) in [first, first + count) of a mapped
/// file, read in place and widened only when copied out.
template <typename T>
class MappedTokens : public TokenArray {
 public:
  MappedTokens(std::shared_ptr<const FileMap> map, int64_t first, int64_t count, int64_t vocab)
      : map_(std::move(map)), first_(first), count_(count), vocab_(vocab) {}
  int64_t size() const override { return count_; }
  // Reads go through FileMap::read (NOTE [Data that changes under a job]).
  void copy_to(int64_t begin, int64_t count, int64_t* out) const override {
    check_range(*this, begin, count);
    map_->read([&] {
      const T* src = tokens() + begin;
      for (int64_t i = 0; i < count; ++i) {
        out[i] = src[i];
        if (out[i] >= vocab_) throw_outside_vocab(begin + i, out[i]);
      }
    });
  }
  /// Throws if a token of [begin, begin + count) is outside the vocabulary, reading in place.
  void check_vocab(int64_t begin, int64_t count) const {
    check_range(*this, begin, count);
    map_->read([&] {
      const T* src = tokens() + begin;
      for (int64_t i = 0; i < count; ++i)
        if (static_cast<int64_t>(src[i]) >= vocab_) throw_outside_vocab(begin + i, src[i]);
    });
  }

 private:
  const T* tokens() const { return reinterpret_cast<const T*>(map_->data()) + first_; }
  [[noreturn]] void throw_outside_vocab(int64_t index, int64_t token) const {
    throw UserError(
        fmt::format("data {}: token {} at index {} is outside model.vocab_size = {}; "
                    "set model.vocab_size to the data's vocabulary (at least {})",
                    map_->path(), token, first_ + index, vocab_, token + 1));
  }

  std::shared_ptr<const FileMap> map_;
  int64_t first_, count_, vocab_;
};

/// NOTE [Vocabulary check]: the head of the file and chunks spread evenly over the rest.
template <typename T>
void scan_vocab(const MappedTokens<T>& tokens) {
  const int64_t n = tokens.size();
  const int64_t head = std::min(n, kScanHeadTokens);
  tokens.check_vocab(0, head);
  const int64_t rest = n - head;
  if (rest <= 0) return;
  const int64_t chunk = std::min(rest, kScanChunkTokens);
  for (int64_t c = 0; c < kScanChunks; ++c) {
    const int64_t begin = head + (rest - chunk) * c / std::max<int64_t>(kScanChunks - 1, 1);
    tokens.check_vocab(begin, chunk);
  }
}

}  // namespace

TokenMeta read_token_meta(const std::filesystem::path& folder) {
  const std::filesystem::path path = folder / "meta.json";
  TokenMeta m;
  if (!std::filesystem::exists(path)) return m;
  const nlohmann::json meta = nlohmann::json::parse(read_input_file(path.string(), "data"), nullptr,
                                                    /*allow_exceptions=*/false);
  VS_USER_CHECK(meta.is_object() && meta.contains("vocab_size") &&
                    meta["vocab_size"].is_number_integer() && meta["vocab_size"] > 0,
                "data {}: expected a JSON object with a positive integer \"vocab_size\"",
                path.string());
  m.vocab_size = meta["vocab_size"].get<int64_t>();
  if (meta.contains("dtype")) {
    VS_USER_CHECK(meta["dtype"] == "uint16" || meta["dtype"] == "uint32",
                  "data {}: \"dtype\" is {}, not \"uint16\" or \"uint32\"", path.string(),
                  meta["dtype"].dump());
    m.dtype = meta["dtype"].get<std::string>();
  }
  for (auto [key, field] :
       {std::pair{"train_tokens", &m.train_tokens}, {"val_tokens", &m.val_tokens}}) {
    if (!meta.contains(key)) continue;
    VS_USER_CHECK(meta[key].is_number_integer() && meta[key] >= 0,
                  "data {}: \"{}\" is {}, not a token count", path.string(), key, meta[key].dump());
    *field = meta[key].get<int64_t>();
  }
  for (auto [key, field] : {std::pair{"tokenizer", &m.tokenizer},
                            {"tokenizer_path", &m.tokenizer_path},
                            {"chat_template", &m.chat_template}}) {
    if (meta.contains(key) && meta[key].is_string()) *field = meta[key].get<std::string>();
  }
  if (meta.contains("chat_template_strings")) {
    const nlohmann::json& strings = meta["chat_template_strings"];
    VS_USER_CHECK(
        strings.is_object() && std::all_of(strings.begin(), strings.end(),
                                           [](const nlohmann::json& v) { return v.is_string(); }),
        "data {}: \"chat_template_strings\" is {}, not an object of strings", path.string(),
        strings.dump());
    for (const auto& [key, value] : strings.items())
      m.chat_template_strings[key] = value.get<std::string>();
  }
  if (meta.contains("mask")) {
    VS_USER_CHECK(meta["mask"].is_boolean(), "data {}: \"mask\" is {}, not true or false",
                  path.string(), meta["mask"].dump());
    m.mask = meta["mask"].get<bool>();
  }
  return m;
}

namespace {

/// train.bin or val.bin of `T` tokens, checked by a scan when there is no meta.json.
template <typename T>
std::shared_ptr<TokenArray> map_bin_tokens(const std::filesystem::path& path, int64_t vocab,
                                           bool scan) {
  auto map = std::make_shared<const FileMap>(path.string());
  VS_USER_CHECK(map->bytes() % sizeof(T) == 0 && map->bytes() >= 2 * sizeof(T),
                "data {}: {} bytes is not a uint{} token file", path.string(), map->bytes(),
                8 * sizeof(T));
  auto tokens = std::make_shared<MappedTokens<T>>(
      map, 0, static_cast<int64_t>(map->bytes() / sizeof(T)), vocab);
  if (scan) scan_vocab(*tokens);
  return tokens;
}

/// A split's example starts (uint64 offsets, data prepare --sft), checked to be increasing and
/// inside its `tokens`.
std::vector<int64_t> read_starts(const std::filesystem::path& path, int64_t tokens) {
  const FileMap map(path.string());
  VS_USER_CHECK(map.bytes() % sizeof(uint64_t) == 0,
                "data {}: {} bytes is not a file of uint64 example starts", path.string(),
                map.bytes());
  std::vector<int64_t> out(map.bytes() / sizeof(uint64_t));
  map.read([&] {
    const auto* src = reinterpret_cast<const uint64_t*>(map.data());
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = static_cast<int64_t>(src[i]);
  });
  for (size_t i = 0; i < out.size(); ++i)
    VS_USER_CHECK(out[i] >= 0 && out[i] < tokens && (i == 0 || out[i] > out[i - 1]),
                  "data {}: example start {} ({}) is not inside the split's {} tokens after the "
                  "one before; run data prepare again",
                  path.string(), i, out[i], tokens);
  return out;
}

/// The masks and example starts of a fine-tuning folder (NOTE [Loss masks]).
void load_masks(const std::filesystem::path& folder, TokenData& d) {
  for (const auto& [name, tokens, mask, starts] :
       {std::tuple{"train", d.train, &d.train_mask, &d.train_starts},
        std::tuple{"val", d.val, &d.val_mask, &d.val_starts}}) {
    const std::filesystem::path mask_path = folder / (std::string(name) + ".mask.bin");
    const std::filesystem::path starts_path = folder / (std::string(name) + ".docs.bin");
    for (const auto& p : {mask_path, starts_path})
      VS_USER_CHECK(std::filesystem::exists(p),
                    "data.path {}: meta.json says \"mask\": true, but {} is missing; run data "
                    "prepare --sft again",
                    folder.string(), p.filename().string());
    *mask = std::make_shared<const TokenMask>(mask_path.string());
    VS_USER_CHECK((*mask)->size() == tokens->size(),
                  "data {}: {} mask bytes for {} tokens: the files are not of one data prepare "
                  "run; run data prepare again",
                  mask_path.string(), (*mask)->size(), tokens->size());
    *starts = read_starts(starts_path, tokens->size());
  }
  d.description += fmt::format(", a loss mask, {} train / {} val examples", d.train_starts.size(),
                               d.val_starts.size());
}

}  // namespace

TokenMask::TokenMask(const std::string& path)
    : map_(std::make_shared<const FileMap>(path)), size_(static_cast<int64_t>(map_->bytes())) {}

void TokenMask::copy_to(int64_t begin, int64_t count, uint8_t* out) const {
  VS_CHECK(begin >= 0 && count >= 0 && begin + count <= size_,
           "[data] mask [{}, {}) out of range of {}", begin, begin + count, size_);
  map_->read([&] {
    const auto* src = reinterpret_cast<const uint8_t*>(map_->data()) + begin;
    for (int64_t i = 0; i < count; ++i)
      out[i] = src[i] != 0 ? 1 : 0;
  });
}

int64_t TokenMask::trained(int64_t begin, int64_t count) const {
  std::vector<uint8_t> bytes(static_cast<size_t>(count));
  copy_to(begin, count, bytes.data());
  return std::count(bytes.begin(), bytes.end(), uint8_t{1});
}

at::Tensor TokenArray::slice(int64_t begin, int64_t count) const {
  at::Tensor out = at::empty({count}, host_long());
  copy_to(begin, count, out.data_ptr<int64_t>());
  return out;
}

TokenData load_text_tokens(const std::string& path, double val_fraction) {
  auto map = std::make_shared<const FileMap>(path);
  const auto bytes = static_cast<int64_t>(map->bytes());
  const auto n_val = static_cast<int64_t>(static_cast<double>(bytes) * val_fraction);
  const int64_t n_train = bytes - n_val;
  VS_USER_CHECK(n_train > 1024 && n_val > 64,
                "data.path {}: {} bytes is too little text to train on", path, bytes);
  TokenData d;
  d.train = std::make_shared<MappedTokens<uint8_t>>(map, 0, n_train, 256);
  d.val = std::make_shared<MappedTokens<uint8_t>>(map, n_train, n_val, 256);
  d.vocab_size = 256;
  d.description = fmt::format("text {} ({} train / {} val bytes)", path, n_train, n_val);
  return d;
}

TokenData load_bin_tokens(const std::string& folder, int64_t vocab_size) {
  namespace fs = std::filesystem;
  for (const char* name : {"train.bin", "val.bin"}) {
    VS_USER_CHECK(fs::exists(fs::path(folder) / name),
                  "data.path {}: missing {} (nanoGPT uint16 tokens)", folder, name);
  }
  VS_USER_CHECK(!fs::exists(fs::path(folder) / "meta.json.partial"),
                "data.path {}: a data prepare stopped while it replaced these files "
                "(meta.json.partial is there); run data prepare again",
                folder);
  const TokenMeta meta = read_token_meta(folder);
  VS_USER_CHECK(meta.vocab_size <= vocab_size,
                "data {}: vocab_size {} is more than model.vocab_size = {}; set model.vocab_size "
                ">= {}",
                (fs::path(folder) / "meta.json").string(), meta.vocab_size, vocab_size,
                meta.vocab_size);
  const bool scan = meta.vocab_size == 0;
  auto map = [&](const char* name) {
    const fs::path path = fs::path(folder) / name;
    return meta.dtype == "uint32" ? map_bin_tokens<uint32_t>(path, vocab_size, scan)
                                  : map_bin_tokens<uint16_t>(path, vocab_size, scan);
  };
  TokenData d;
  d.train = map("train.bin");
  d.val = map("val.bin");
  // A folder with the files of two `data prepare` runs (one stopped between its renames, before
  // [36]) would read one run's tokens at the other's width.
  for (const auto& [name, tokens, said] : {std::tuple{"train.bin", d.train, meta.train_tokens},
                                           std::tuple{"val.bin", d.val, meta.val_tokens}}) {
    VS_USER_CHECK(said < 0 || tokens->size() == said,
                  "data {}: {} {} tokens, but meta.json says {}: the files are not of one data "
                  "prepare run; run data prepare again",
                  (fs::path(folder) / name).string(), tokens->size(), meta.dtype, said);
  }
  d.vocab_size = vocab_size;
  d.description = fmt::format("tokens {} ({} train / {} val {} tokens, vocab {} checked by {})",
                              folder, d.train->size(), d.val->size(), meta.dtype, vocab_size,
                              scan ? "a scan" : "meta.json");
  if (meta.mask) load_masks(fs::path(folder), d);
  return d;
}

TokenData synthetic_tokens(int64_t vocab_size, uint64_t seed) {
  auto make = [&](int64_t n, uint64_t salt) {
    at::Tensor noise =
        keep_mask(derive({seed, stream_id("synthetic-tokens")}, salt), Box::whole({n}), 0.1);
    const bool* bump = noise.data_ptr<bool>();
    at::Tensor out = at::empty({n}, host_long());
    int64_t* t = out.data_ptr<int64_t>();
    t[0] = static_cast<int64_t>(seed % static_cast<uint64_t>(vocab_size));
    for (int64_t i = 1; i < n; ++i)
      t[i] = (5 * t[i - 1] + 3 + (bump[i] ? 1 : 0)) % vocab_size;
    return std::make_shared<MemoryTokens>(out);
  };
  TokenData d;
  d.train = make(1 << 20, 0);
  d.val = make(1 << 16, 1);
  d.vocab_size = vocab_size;
  d.description = fmt::format("synthetic sequence task (vocab {})", vocab_size);
  return d;
}

BatchSlice batch_slice(int64_t global_rows, int64_t dp, int64_t dp_rank, int64_t microbatches,
                       int64_t micro) {
  VS_CHECK(global_rows % (dp * microbatches) == 0, "[data] {} rows do not split into {} x {}",
           global_rows, dp, microbatches);
  const int64_t per_rank = global_rows / dp;
  const int64_t rows = per_rank / microbatches;
  return {global_rows, dp_rank * per_rank + micro * rows, rows};
}

namespace {

/// Where each row of `slice` starts: row i of the global batch at a uniform position in
/// [0, span) drawn from (seed, step, i).
std::vector<int64_t> row_starts(uint64_t seed, int64_t step, int64_t span,
                                const BatchSlice& slice) {
  Box rows = Box::whole({slice.global_rows});
  rows.sizes = {slice.rows};
  rows.offsets = {slice.row_offset};
  const at::Tensor u = uniform(derive({seed, stream_id("batches")}, static_cast<uint64_t>(step)),
                               rows, 0.0, 1.0, at::kDouble)
                           .contiguous();
  const double* draws = u.data_ptr<double>();
  std::vector<int64_t> starts(static_cast<size_t>(slice.rows));
  for (int64_t r = 0; r < slice.rows; ++r)
    starts[static_cast<size_t>(r)] =
        std::min<int64_t>(span - 1, static_cast<int64_t>(draws[r] * static_cast<double>(span)));
  return starts;
}

}  // namespace

std::pair<at::Tensor, at::Tensor> token_batch(const TokenArray& train, uint64_t seed, int64_t step,
                                              int64_t seq_len, const BatchSlice& slice) {
  const int64_t span = train.size() - seq_len - 1;
  VS_USER_CHECK(span > 0, "[data] the train split ({} tokens) is shorter than seq_len + 1 = {}",
                train.size(), seq_len + 1);
  // Only the batch's windows are widened: seq_len + 1 tokens per row, inputs and targets overlap.
  at::Tensor windows = at::empty({slice.rows, seq_len + 1}, host_long());
  int64_t* dst = windows.data_ptr<int64_t>();
  const std::vector<int64_t> starts = row_starts(seed, step, span, slice);
  for (int64_t r = 0; r < slice.rows; ++r)
    train.copy_to(starts[static_cast<size_t>(r)], seq_len + 1, dst + r * (seq_len + 1));
  return {windows.narrow(1, 0, seq_len).contiguous(), windows.narrow(1, 1, seq_len).contiguous()};
}

std::vector<RowWindow> batch_windows(int64_t tokens, const std::vector<int64_t>& starts,
                                     bool examples, uint64_t seed, int64_t step, int64_t seq_len,
                                     const BatchSlice& slice) {
  std::vector<RowWindow> out;
  if (!examples) {
    const int64_t span = tokens - seq_len - 1;
    VS_USER_CHECK(span > 0, "[data] the train split ({} tokens) is shorter than seq_len + 1 = {}",
                  tokens, seq_len + 1);
    for (int64_t start : row_starts(seed, step, span, slice))
      out.push_back({start, seq_len + 1});
    return out;
  }
  const auto n = static_cast<int64_t>(starts.size());
  VS_USER_CHECK(n > 0, "[data] the train split holds no example start");
  for (int64_t e : row_starts(seed, step, n, slice)) {
    const int64_t end = e + 1 < n ? starts[static_cast<size_t>(e + 1)] : tokens;
    out.push_back({starts[static_cast<size_t>(e)],
                   std::min(end - starts[static_cast<size_t>(e)], seq_len + 1)});
  }
  return out;
}

std::pair<at::Tensor, at::Tensor> window_batch(const TokenArray& data, const TokenMask* mask,
                                               const std::vector<RowWindow>& rows,
                                               int64_t seq_len) {
  const auto n = static_cast<int64_t>(rows.size());
  at::Tensor windows = at::zeros({n, seq_len + 1}, host_long());
  at::Tensor targets = at::full({n, seq_len}, kIgnoreTarget, host_long());
  int64_t* w = windows.data_ptr<int64_t>();
  int64_t* t = targets.data_ptr<int64_t>();
  std::vector<uint8_t> trained(static_cast<size_t>(seq_len + 1), 1);
  for (int64_t r = 0; r < n; ++r) {
    const RowWindow& row = rows[static_cast<size_t>(r)];
    data.copy_to(row.start, row.tokens, w + r * (seq_len + 1));
    if (mask != nullptr) mask->copy_to(row.start, row.tokens, trained.data());
    // Target j is token j + 1 of the window.
    for (int64_t j = 0; j + 1 < row.tokens; ++j)
      if (trained[static_cast<size_t>(j + 1)] != 0)
        t[r * seq_len + j] = w[r * (seq_len + 1) + j + 1];
  }
  return {windows.narrow(1, 0, seq_len).contiguous(), targets};
}

int64_t trained_targets(const TokenMask& mask, const std::vector<RowWindow>& rows) {
  int64_t out = 0;
  for (const RowWindow& row : rows)
    out += row.tokens > 1 ? mask.trained(row.start + 1, row.tokens - 1) : 0;
  return out;
}

RowWindow val_row(const TokenArray& val, const std::vector<int64_t>& starts, bool examples,
                  int64_t window, int64_t seq_len) {
  VS_CHECK(window < val_rows_available(val, starts, examples, seq_len),
           "[data] validation window {} is past the val split", window);
  if (!examples) return {window * seq_len, seq_len + 1};
  const auto w = static_cast<size_t>(window);
  const int64_t end = w + 1 < starts.size() ? starts[w + 1] : val.size();
  return {starts[w], std::min(end - starts[w], seq_len + 1)};
}

int64_t val_rows_available(const TokenArray& val, const std::vector<int64_t>& starts, bool examples,
                           int64_t seq_len) {
  return examples ? static_cast<int64_t>(starts.size()) : val_windows_available(val, seq_len);
}

int64_t val_windows_available(const TokenArray& val, int64_t seq_len) {
  return (val.size() - 1) / seq_len;
}

std::pair<at::Tensor, at::Tensor> val_window(const TokenArray& val, int64_t window,
                                             int64_t seq_len) {
  VS_CHECK(window < val_windows_available(val, seq_len),
           "[data] validation window {} is past the val split", window);
  const at::Tensor chunk = val.slice(window * seq_len, seq_len + 1);
  return {chunk.narrow(0, 0, seq_len).unsqueeze(0).clone(),
          chunk.narrow(0, 1, seq_len).unsqueeze(0).clone()};
}

}  // namespace vescale
