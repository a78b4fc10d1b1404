// The fuzz tests' allocation meter (tests/support/allocation_meter.h) sees what they bound:
// operator new and LibTorch's CPU tensors, on any thread, and nothing outside its lifetime.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "support/allocation_meter.h"

namespace vescale::testing {
namespace {

TEST(AllocationMeter, SeesNewAndTensorsOnEveryThreadWhileItLives) {
  std::vector<char> before(size_t{32} << 20);  // not counted: before the meter
  AllocationCounts counts;
  {
    AllocationMeter meter;
    std::vector<char> bytes(size_t{5} << 20);
    EXPECT_GE(meter.counts().largest, size_t{5} << 20);
    const at::Tensor t = at::empty({int64_t{3} << 20}, at::kFloat);  // 12 MiB, posix_memalign
    EXPECT_GE(meter.counts().largest, size_t{12} << 20);
    std::thread([] { std::vector<char> other(size_t{20} << 20); }).join();
    counts = meter.counts();
  }
  std::vector<char> after(size_t{64} << 20);  // not counted: after it
  EXPECT_GE(counts.largest, size_t{20} << 20);
  EXPECT_LT(counts.largest, size_t{32} << 20);
  EXPECT_GE(counts.total, size_t{37} << 20);
  EXPECT_GE(counts.calls, 3u);
  AllocationMeter again;  // a new meter starts from nothing
  EXPECT_LT(again.counts().largest, size_t{1} << 20);
}

}  // namespace
}  // namespace vescale::testing
