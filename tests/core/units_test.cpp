#include "core/units.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/chunking.h"
#include "core/error.h"

namespace vescale {
namespace {

TEST(Units, ParseBytes) {
  EXPECT_EQ(parse_bytes("512"), 512);
  EXPECT_EQ(parse_bytes("1K"), 1024);
  EXPECT_EQ(parse_bytes("4KiB"), 4096);
  EXPECT_EQ(parse_bytes("16M"), 16 << 20);
  EXPECT_EQ(parse_bytes("1G"), int64_t{1} << 30);
  EXPECT_EQ(parse_byte_list("1K,1M"), (std::vector<int64_t>{1024, 1 << 20}));
  for (const char* bad :
       {"", "K", "1X", "-1", "1.5M", "99999999999G", "8388609G", "99999999999999999999"})
    EXPECT_THROW(parse_bytes(bad), UserError) << bad;
  EXPECT_EQ(parse_bytes("8388608G"), int64_t{1} << 53);
}

TEST(Units, Format) {
  EXPECT_EQ(format_bytes(512), "512B");
  EXPECT_EQ(format_bytes(1024), "1KiB");
  EXPECT_EQ(format_bytes(1536), "1.5KiB");
  EXPECT_EQ(format_bytes(16 << 20), "16MiB");
  // Huge figures (a model of n_embd = 2^63 - 1) stay positive and readable.
  EXPECT_EQ(format_bytes(std::pow(2.0, 63) * 12), "96EiB");
  EXPECT_EQ(format_bytes(std::pow(2.0, 126)), "7.38e+19EiB");
  EXPECT_EQ(format_bytes(std::pow(2.0, 50)), "1PiB");
  EXPECT_EQ(format_duration(250), "4m10s");
  EXPECT_EQ(format_duration(2.34), "2.3s");
  EXPECT_EQ(format_duration(0.0123), "12.30ms");
  EXPECT_EQ(format_duration(12e-6), "12.0us");
  EXPECT_EQ(format_duration(0), "0s");
}

TEST(Chunking, FollowsTorchChunk) {
  EXPECT_EQ(chunk_sizes(8, 4), (std::vector<int64_t>{2, 2, 2, 2}));
  EXPECT_EQ(chunk_sizes(5, 4), (std::vector<int64_t>{2, 2, 1, 0}));
  EXPECT_EQ(chunk_sizes(9, 4), (std::vector<int64_t>{3, 3, 3, 0}));
  EXPECT_EQ(chunk_sizes(2, 4), (std::vector<int64_t>{1, 1, 0, 0}));
  EXPECT_EQ(chunk_sizes(0, 3), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(chunk_offsets(5, 4), (std::vector<int64_t>{0, 2, 4, 5}));
}

}  // namespace
}  // namespace vescale
