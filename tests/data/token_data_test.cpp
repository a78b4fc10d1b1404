#include "data/token_data.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "core/error.h"

namespace vescale {
namespace {

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
  const TokenData bin = load_bin_tokens(dir);
  EXPECT_EQ(bin.vocab_size, 1000);
  EXPECT_EQ(bin.train->size(), 3000);
  EXPECT_EQ(bin.val->slice(999, 2)[1].item<int64_t>(), 0);
  EXPECT_THROW(load_bin_tokens("/nonexistent"), UserError);
  auto [vx, vy] = val_window(*bin.val, 2, 10);
  EXPECT_EQ(vx[0][0].item<int64_t>(), 20);
}

}  // namespace
}  // namespace vescale
