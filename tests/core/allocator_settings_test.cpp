// NOTE [Allocator settings]: a freed block of a few MiB is reused without faulting its pages in
// again, and a MALLOC_*_ variable in the environment leaves glibc to it.
#include "core/allocator_settings.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace vescale {
namespace {

/// Minor page faults of this process so far.
long minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

TEST(AllocatorSettings, AFreedBlockIsReusedWithoutFaultingItsPagesAgain) {
  ASSERT_EQ(std::getenv("MALLOC_MMAP_THRESHOLD_"), nullptr);
  ASSERT_EQ(std::getenv("MALLOC_TRIM_THRESHOLD_"), nullptr);
  ASSERT_EQ(std::getenv("MALLOC_TOP_PAD_"), nullptr);
  const std::string line = apply_allocator_settings();
  EXPECT_NE(line.find("keeps freed memory"), std::string::npos) << line;
  // What a step does to an activation: allocate 8 MiB, write it, free it; twice.
  constexpr size_t kBytes = 8u << 20;
  long faults[2] = {0, 0};
  for (long& f : faults) {
    const long before = minor_faults();
    // Through a volatile pointer, so the compiler cannot drop the block.
    auto* block = static_cast<volatile char*>(std::malloc(kBytes));
    for (size_t offset = 0; offset < kBytes; offset += 4096)
      block[offset] = 1;
    std::free(const_cast<char*>(block));
    f = minor_faults() - before;
  }
  std::printf("[alloc] minor faults writing 8 MiB: %ld the first time, %ld the second\n", faults[0],
              faults[1]);
  // glibc's defaults: 2,049 then 2,048 (the block is mmap'd and unmapped each time).
  EXPECT_LT(faults[1], 64);
}

TEST(AllocatorSettings, AnEnvironmentVariableLeavesGlibcToIt) {
  ASSERT_EQ(::setenv("MALLOC_TOP_PAD_", "0", 1), 0);
  const std::string line = apply_allocator_settings();
  ::unsetenv("MALLOC_TOP_PAD_");
  EXPECT_NE(line.find("as the environment sets it (MALLOC_TOP_PAD_ is set"), std::string::npos)
      << line;
}

}  // namespace
}  // namespace vescale
