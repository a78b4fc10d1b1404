// What a stretch of code asks of the heap: the test binary routes malloc and its kin through
// counters (to glibc's allocator, unchanged), so a fuzz case can be held to an allocation in
// proportion to its input. Every heap request counts, operator new and LibTorch's CPU tensors
// included; memory-mapped files do not.
#pragma once

#include <cstddef>

namespace vescale::testing {

struct AllocationCounts {
  size_t largest = 0;  ///< the largest single request, in bytes
  size_t total = 0;    ///< all requests together, in bytes
  size_t calls = 0;
};

/// Counts the requests of every thread from construction to counts(); one meter at a time.
class AllocationMeter {
 public:
  AllocationMeter();
  ~AllocationMeter();
  AllocationMeter(const AllocationMeter&) = delete;
  AllocationMeter& operator=(const AllocationMeter&) = delete;

  AllocationCounts counts() const;
};

}  // namespace vescale::testing
