// Issue [26] item 4: seeded fuzzing of data.source = "tokens" folders (train.bin, val.bin,
// meta.json) through load_bin_tokens and the batches and validation windows a job reads. Each
// damaged folder must be refused by name, or give only tokens inside the vocabulary.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "data/token_data.h"
#include "support/fuzz.h"
#include "support/mutate.h"

namespace vescale {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kVocab = 300;  // the model's
constexpr int64_t kSeqLen = 16;

std::string tokens_bytes(int64_t n, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::string bytes(static_cast<size_t>(n) * 2, '\0');
  for (int64_t i = 0; i < n; ++i) {
    const auto token = static_cast<uint16_t>(rng() % 280);
    std::memcpy(&bytes[static_cast<size_t>(i) * 2], &token, 2);
  }
  return bytes;
}

/// Reads what a job reads: batches of every step of a short run and every validation window.
void read_like_a_job(const std::string& folder) {
  const TokenData d = load_bin_tokens(folder, kVocab);
  for (int64_t step = 0; step < 8; ++step) {
    const auto [x, y] = token_batch(*d.train, 7, step, kSeqLen, batch_slice(8, 1, 0, 1, 0));
    EXPECT_TRUE(x.lt(kVocab).all().item<bool>() && y.ge(0).all().item<bool>());
  }
  const int64_t windows = val_windows_available(*d.val, kSeqLen);
  for (int64_t w = 0; w < windows; ++w) {
    const auto [x, y] = val_window(*d.val, w, kSeqLen);
    EXPECT_TRUE(x.lt(kVocab).all().item<bool>() && y.lt(kVocab).all().item<bool>());
  }
}

TEST(Fuzz, DamagedTokenFoldersAreRefusedByNameOrReadInsideTheVocabulary) {
  const fs::path dir = fs::path(::testing::TempDir()) / "token-fuzz";
  const std::string train = tokens_bytes(4096, 1), val = tokens_bytes(600, 2);
  const std::string meta = nlohmann::json{{"vocab_size", 280}}.dump(2);
  testing::Mutator mutate(20261126);
  testing::FuzzRun run("token file");
  for (int i = 0; i < 1200; ++i) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::string t = train, v = val, m = meta;
    std::string& bin = mutate.below(2) == 0 ? t : v;
    const bool with_meta = mutate.below(3) != 0;
    std::string what;
    switch (i % 8) {
      case 0:
      case 1:
        m = mutate.json(meta, testing::hostile_json_values());
        what = "meta.json edited";
        break;
      case 2:  // a token past the vocabulary, anywhere
        bin[2 * mutate.below(bin.size() / 2) + 1] = static_cast<char>(0x80 | mutate.below(128));
        what = "a token past the vocabulary";
        break;
      case 3:
        mutate.flip_byte(bin, 0, bin.size());
        what = "a byte flipped";
        break;
      case 4:
        bin.resize(mutate.below(bin.size()));
        what = "cut short";
        break;
      case 5:
        bin.resize(mutate.below(2 * kSeqLen + 4));
        what = "a few tokens";
        break;
      case 6:
        m = R"({"vocab_size": )" + std::to_string(static_cast<int64_t>(mutate.below(1000)) - 2) +
            "}";
        what = "another vocab_size";
        break;
      default:
        what = "intact";
        break;
    }
    testing::write_bytes((dir / "train.bin").string(), t);
    testing::write_bytes((dir / "val.bin").string(), v);
    if (with_meta || i % 8 <= 1) testing::write_bytes((dir / "meta.json").string(), m);
    if (i % 50 == 7) {  // a file that is not one: a folder, a FIFO, missing
      const fs::path victim = dir / (i % 3 == 0   ? "train.bin"
                                     : i % 3 == 1 ? "val.bin"
                                                  : "meta.json");
      fs::remove(victim);
      if (i % 150 == 7) fs::create_directory(victim);
      if (i % 150 == 57) {
        ASSERT_EQ(::mkfifo(victim.c_str(), 0600), 0);
      }
      what = "a file replaced by a folder, a FIFO or nothing";
    }
    run.one(std::to_string(i) + " (" + what + ")", t.size() + v.size() + m.size(),
            [&] { read_like_a_job(dir.string()); });
  }
  fs::remove_all(dir);
  run.finish(1000, 60);
}

}  // namespace
}  // namespace vescale
