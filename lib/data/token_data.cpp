#include "data/token_data.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/device.h"
#include "core/error.h"
#include "dtensor/random.h"

namespace vescale {
namespace {

/// Token tensors are filled through host pointers (NOTE [Host data]).
at::TensorOptions host_long() {
  return at::dtype(at::kLong).device(kCpu);
}

/// Tokens held in memory as int64.
class MemoryTokens : public TokenArray {
 public:
  explicit MemoryTokens(at::Tensor tokens) : tokens_(std::move(tokens)) {}
  int64_t size() const override { return tokens_.numel(); }
  at::Tensor slice(int64_t begin, int64_t count) const override {
    return tokens_.narrow(0, begin, count).clone();
  }

 private:
  at::Tensor tokens_;
};

/// A memory-mapped flat uint16 file.
class MappedTokens : public TokenArray {
 public:
  explicit MappedTokens(const std::string& path) : path_(path) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    VS_USER_CHECK(fd >= 0, "data {}: cannot open: {}", path, std::strerror(errno));
    struct stat st {};
    ::fstat(fd, &st);
    bytes_ = static_cast<size_t>(st.st_size);
    VS_USER_CHECK(bytes_ % 2 == 0 && bytes_ >= 4, "data {}: {} bytes is not a uint16 token file",
                  path, bytes_);
    data_ = ::mmap(nullptr, bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    VS_USER_CHECK(data_ != MAP_FAILED, "data {}: mmap failed: {}", path, std::strerror(errno));
  }
  ~MappedTokens() override { ::munmap(data_, bytes_); }
  int64_t size() const override { return static_cast<int64_t>(bytes_ / 2); }
  at::Tensor slice(int64_t begin, int64_t count) const override {
    VS_CHECK(begin >= 0 && begin + count <= size(), "[data] slice out of range of {}", path_);
    const auto* tokens = static_cast<const uint16_t*>(data_) + begin;
    at::Tensor out = at::empty({count}, host_long());
    int64_t* dst = out.data_ptr<int64_t>();
    for (int64_t i = 0; i < count; ++i)
      dst[i] = tokens[i];
    return out;
  }

 private:
  std::string path_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

int64_t max_token(const TokenArray& a) {
  return a.size() == 0 ? 0 : a.slice(0, a.size()).max().item<int64_t>();
}

}  // namespace

TokenData load_text_tokens(const std::string& path, double val_fraction) {
  std::ifstream in(path, std::ios::binary);
  VS_USER_CHECK(in.good(), "data.path {}: cannot read the file", path);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  at::Tensor all = at::empty({static_cast<int64_t>(bytes.size())}, host_long());
  int64_t* dst = all.data_ptr<int64_t>();
  for (size_t i = 0; i < bytes.size(); ++i)
    dst[i] = static_cast<unsigned char>(bytes[i]);
  const int64_t n_val = static_cast<int64_t>(static_cast<double>(all.numel()) * val_fraction);
  const int64_t n_train = all.numel() - n_val;
  VS_USER_CHECK(n_train > 1024 && n_val > 64,
                "data.path {}: {} bytes is too little text to train on", path, bytes.size());
  TokenData d;
  d.train = std::make_shared<MemoryTokens>(all.narrow(0, 0, n_train));
  d.val = std::make_shared<MemoryTokens>(all.narrow(0, n_train, n_val));
  d.vocab_size = 256;
  d.description = fmt::format("text {} ({} train / {} val bytes)", path, n_train, n_val);
  return d;
}

TokenData load_bin_tokens(const std::string& folder) {
  namespace fs = std::filesystem;
  for (const char* name : {"train.bin", "val.bin"}) {
    VS_USER_CHECK(fs::exists(fs::path(folder) / name),
                  "data.path {}: missing {} (nanoGPT uint16 tokens)", folder, name);
  }
  TokenData d;
  d.train = std::make_shared<MappedTokens>((fs::path(folder) / "train.bin").string());
  d.val = std::make_shared<MappedTokens>((fs::path(folder) / "val.bin").string());
  d.vocab_size = std::max(max_token(*d.train), max_token(*d.val)) + 1;
  d.description =
      fmt::format("tokens {} ({} train / {} val tokens)", folder, d.train->size(), d.val->size());
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

std::pair<at::Tensor, at::Tensor> token_batch(const TokenArray& train, uint64_t seed, int64_t step,
                                              int64_t seq_len, const BatchSlice& slice) {
  const int64_t span = train.size() - seq_len - 1;
  VS_USER_CHECK(span > 0, "[data] the train split ({} tokens) is shorter than seq_len + 1 = {}",
                train.size(), seq_len + 1);
  // Row i of the global batch starts at a uniform position drawn from (seed, step, i).
  Box rows = Box::whole({slice.global_rows});
  rows.sizes = {slice.rows};
  rows.offsets = {slice.row_offset};
  const at::Tensor u = uniform(derive({seed, stream_id("batches")}, static_cast<uint64_t>(step)),
                               rows, 0.0, 1.0, at::kDouble);
  at::Tensor x = at::empty({slice.rows, seq_len}, host_long());
  at::Tensor y = at::empty({slice.rows, seq_len}, host_long());
  for (int64_t r = 0; r < slice.rows; ++r) {
    const int64_t start =
        std::min<int64_t>(span - 1, static_cast<int64_t>(u[r].item<double>() * span));
    const at::Tensor chunk = train.slice(start, seq_len + 1);
    x[r].copy_(chunk.narrow(0, 0, seq_len));
    y[r].copy_(chunk.narrow(0, 1, seq_len));
  }
  return {x, y};
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
