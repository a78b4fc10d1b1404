// The memory meter counts the bytes of CPU tensors while they live, and only those it handed out.
#include "core/memory_meter.h"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/alignment.h>
#include <gtest/gtest.h>

#include <cstdint>

namespace vescale {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

TEST(MemoryMeter, CountsATensorWhileItLives) {
  install_memory_meter();
  ASSERT_TRUE(memory_meter_installed());
  const int64_t before = metered_live_bytes();
  reset_metered_peak();
  {
    at::Tensor t = at::ones({kMiB}, at::kByte);
    EXPECT_EQ(metered_live_bytes() - before, kMiB);
    EXPECT_EQ(metered_peak_bytes() - before, kMiB);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % c10::gAlignment, 0u);
    // The memory is usable (the sum's int64 copy of t counts too, while it lives).
    EXPECT_EQ(t.sum().item<int64_t>(), kMiB);
  }
  EXPECT_EQ(metered_live_bytes(), before);
  EXPECT_GE(metered_peak_bytes() - before, 9 * kMiB);
}

TEST(MemoryMeter, FreesOfEarlierAllocationsAreNotSubtracted) {
  // Allocated before install (unless an earlier test of this process installed it already: then
  // counted and subtracted alike), freed after: the count must not drop below where it was.
  const int64_t before = metered_live_bytes();
  at::Tensor earlier = at::zeros({kMiB}, at::kByte);
  install_memory_meter();
  earlier = at::Tensor();
  EXPECT_EQ(metered_live_bytes(), before);
}

TEST(MemoryMeter, RawInterface) {
  // What oneDNN uses: the context is the data pointer and raw_deleter frees it.
  install_memory_meter();
  c10::Allocator* allocator = c10::GetCPUAllocator();
  const int64_t before = metered_live_bytes();
  void* p = allocator->raw_allocate(1000);
  EXPECT_EQ(metered_live_bytes() - before, 1000);
  allocator->raw_deallocate(p);
  EXPECT_EQ(metered_live_bytes(), before);
  EXPECT_FALSE(allocator->allocate(0));  // no memory for no bytes
}

}  // namespace
}  // namespace vescale
