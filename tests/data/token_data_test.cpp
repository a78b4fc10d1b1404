#include "data/token_data.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "support/errors.h"
#include "support/temp_folder.h"

namespace vescale {
namespace {

namespace fs = std::filesystem;
using testing::error_of;
using testing::temp_folder;

/// A sparse file of `tokens` zero tokens (no disk, no page cache until read).
void write_sparse_tokens(const std::string& path, int64_t tokens) {
  { std::ofstream touch(path, std::ios::binary); }
  fs::resize_file(path, static_cast<uintmax_t>(tokens) * 2);
}

void write_token_at(const std::string& path, int64_t index, uint16_t token) {
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
  f.seekp(index * 2);
  f.write(reinterpret_cast<const char*>(&token), 2);
}

/// This process's resident memory (VmRSS), in bytes.
int64_t resident_now() {
  std::ifstream status("/proc/self/status");
  std::string key;
  int64_t kib = 0;
  while (status >> key) {
    if (key == "VmRSS:") {
      status >> kib;
      break;
    }
  }
  return kib * 1024;
}

TEST(TokenData, BatchesArePureFunctionsOfSeedAndStepAndSlicesAgree) {
  const TokenData d = synthetic_tokens(50, 3);
  auto [x, y] = token_batch(*d.train, 3, 7, 16, batch_slice(8, 1, 0, 1, 0));
  auto [x2, y2] = token_batch(*d.train, 3, 7, 16, batch_slice(8, 1, 0, 1, 0));
  EXPECT_TRUE(at::equal(x, x2));
  EXPECT_TRUE(at::equal(y.narrow(1, 0, 15), x.narrow(1, 1, 15)));  // targets are the next tokens
  // dp rank 1 of 2, micro-batch 1 of 2: rows 6..7 of the global batch.
  const BatchSlice s = batch_slice(8, 2, 1, 2, 1);
  EXPECT_EQ(s.row_offset, 6);
  EXPECT_EQ(s.rows, 2);
  auto [xs, ys] = token_batch(*d.train, 3, 7, 16, s);
  EXPECT_TRUE(at::equal(xs, x.narrow(0, 6, 2)));
  auto [other, unused] = token_batch(*d.train, 3, 8, 16, batch_slice(8, 1, 0, 1, 0));
  EXPECT_FALSE(at::equal(other, x));
}

TEST(TokenData, TextAndBinFiles) {
  const std::string text_path = ::testing::TempDir() + "/corpus.txt";
  {
    std::ofstream out(text_path);
    for (int i = 0; i < 400; ++i)
      out << "the quick brown fox " << i << "\n";
  }
  const TokenData text = load_text_tokens(text_path, 0.1);
  EXPECT_EQ(text.vocab_size, 256);
  EXPECT_TRUE(at::equal(text.train->slice(0, 3), at::tensor({116, 104, 101}, at::kLong)));
  const std::string dir = ::testing::TempDir();
  for (const char* name : {"train.bin", "val.bin"}) {
    std::ofstream out(dir + "/" + name, std::ios::binary);
    for (uint16_t t = 0; t < 3000; ++t) {
      const uint16_t v = t % 1000;
      out.write(reinterpret_cast<const char*>(&v), 2);
    }
  }
  const TokenData bin = load_bin_tokens(dir, 1000);
  EXPECT_EQ(bin.vocab_size, 1000);
  EXPECT_EQ(bin.train->size(), 3000);
  EXPECT_EQ(bin.val->slice(999, 2)[1].item<int64_t>(), 0);
  EXPECT_THROW(load_bin_tokens("/nonexistent", 1000), UserError);
  auto [vx, vy] = val_window(*bin.val, 2, 10);
  EXPECT_EQ(vx[0][0].item<int64_t>(), 20);
}

TEST(TokenData, VocabularyMismatchNamesFileTokenAndVocab) {
  const std::string dir = temp_folder("vocab-mismatch");
  write_sparse_tokens(dir + "/train.bin", 5000);
  write_sparse_tokens(dir + "/val.bin", 5000);
  write_token_at(dir + "/train.bin", 1234, 300);
  const std::string message = error_of([&] { load_bin_tokens(dir, 256); });
  std::printf("error: %s\n", message.c_str());
  EXPECT_NE(message.find(dir + "/train.bin"), std::string::npos) << message;
  EXPECT_NE(message.find("token 300 at index 1234"), std::string::npos) << message;
  EXPECT_NE(message.find("model.vocab_size = 256"), std::string::npos) << message;
  EXPECT_EQ(load_bin_tokens(dir, 301).vocab_size, 301);
}

TEST(TokenData, TokenPastTheScanFailsWhenRead) {
  // 64M tokens: the scan reads the first 1M and 32 chunks of 64K, so index 1.5M is not scanned.
  const std::string dir = temp_folder("past-scan");
  write_sparse_tokens(dir + "/train.bin", int64_t{64} << 20);
  write_sparse_tokens(dir + "/val.bin", 5000);
  const int64_t hidden = kScanHeadTokens + kScanHeadTokens / 2;
  write_token_at(dir + "/train.bin", hidden, 40000);
  const TokenData d = load_bin_tokens(dir, 256);
  EXPECT_EQ(d.train->slice(hidden - 10, 10).sum().item<int64_t>(), 0);
  const std::string message = error_of([&] { d.train->slice(hidden - 10, 20); });
  EXPECT_NE(message.find("token 40000 at index"), std::string::npos) << message;
}

TEST(TokenData, MetaJsonDeclaresTheVocabulary) {
  const std::string dir = temp_folder("meta");
  write_sparse_tokens(dir + "/train.bin", 5000);
  write_sparse_tokens(dir + "/val.bin", 5000);
  std::ofstream(dir + "/meta.json") << R"({"vocab_size": 50257})";
  const std::string message = error_of([&] { load_bin_tokens(dir, 256); });
  EXPECT_NE(message.find("meta.json: vocab_size 50257"), std::string::npos) << message;
  EXPECT_EQ(load_bin_tokens(dir, 50304).vocab_size, 50304);
  std::ofstream(dir + "/meta.json") << "[1, 2]";
  EXPECT_THROW(load_bin_tokens(dir, 50304), UserError);
}

TEST(TokenData, MetaJsonDeclaresUint32Tokens) {
  // NOTE [Token files]: data prepare writes uint32 where the vocabulary needs more than 16 bits.
  const std::string dir = temp_folder("uint32");
  for (const char* name : {"/train.bin", "/val.bin"}) {
    std::vector<uint32_t> tokens(4096);
    for (size_t i = 0; i < tokens.size(); ++i)
      tokens[i] = static_cast<uint32_t>(70000 + i % 100);
    std::ofstream(dir + name, std::ios::binary)
        .write(reinterpret_cast<const char*>(tokens.data()),
               static_cast<std::streamsize>(tokens.size() * sizeof(uint32_t)));
  }
  std::ofstream(dir + "/meta.json") << R"({"vocab_size": 70100, "dtype": "uint32"})";
  const TokenData d = load_bin_tokens(dir, 70100);
  EXPECT_EQ(d.train->size(), 4096);
  EXPECT_EQ(d.val->slice(101, 2)[0].item<int64_t>(), 70001);
  EXPECT_EQ(d.val->slice(101, 2)[1].item<int64_t>(), 70002);
  std::ofstream(dir + "/meta.json") << R"({"vocab_size": 70100, "dtype": "int8"})";
  const std::string message = error_of([&] { load_bin_tokens(dir, 70100); });
  EXPECT_NE(message.find("\"dtype\" is \"int8\", not \"uint16\" or \"uint32\""), std::string::npos)
      << message;
  fs::remove_all(dir);
}

TEST(TokenData, HugeSparseFileStartsWithLittleMemoryAndFast) {
  // 4 GiB each (2^31 zero tokens): widening one whole to int64 would take 16 GiB.
  const std::string dir = temp_folder("huge");
  write_sparse_tokens(dir + "/train.bin", int64_t{1} << 31);
  write_sparse_tokens(dir + "/val.bin", int64_t{1} << 31);
  const int64_t rss_before = resident_now();
  const auto start = std::chrono::steady_clock::now();
  const TokenData d = load_bin_tokens(dir, 256);
  auto [x, y] = token_batch(*d.train, 1, 0, 64, batch_slice(16, 1, 0, 1, 0));
  auto [vx, vy] = val_window(*d.val, 0, 64);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double growth_mib = static_cast<double>(resident_now() - rss_before) / (1 << 20);
  std::printf("4 GiB token files: load + first batch in %.3f s, resident growth %.1f MiB\n",
              seconds, growth_mib);
  EXPECT_EQ(x.sum().item<int64_t>() + vy.sum().item<int64_t>(), 0);
  EXPECT_LT(growth_mib, 100.0);
  EXPECT_LT(seconds, 2.0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace vescale
