#include "support/allocation_meter.h"

#include <cerrno>
#include <cstdint>
#include <cstdlib>  // glibc's declarations first: the definitions below must match them

#include <atomic>

// glibc's allocator under its own names: the wrappers below forward to it, so memory from any
// of them is freed by glibc's free(), which is not wrapped.
extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t count, size_t size);
void* __libc_realloc(void* ptr, size_t size);
void* __libc_memalign(size_t alignment, size_t size);
}

namespace {

// Constant-initialized: counting works before any constructor runs.
std::atomic<bool> g_armed{false};
std::atomic<size_t> g_largest{0};
std::atomic<size_t> g_total{0};
std::atomic<size_t> g_calls{0};

void note(size_t bytes) {
  if (!g_armed.load(std::memory_order_relaxed)) return;
  g_total.fetch_add(bytes, std::memory_order_relaxed);
  g_calls.fetch_add(1, std::memory_order_relaxed);
  size_t seen = g_largest.load(std::memory_order_relaxed);
  while (bytes > seen && !g_largest.compare_exchange_weak(seen, bytes, std::memory_order_relaxed)) {
  }
}

bool valid_alignment(size_t alignment) {
  return alignment != 0 && (alignment & (alignment - 1)) == 0;
}

}  // namespace

extern "C" {

void* malloc(size_t size) {
  note(size);
  return __libc_malloc(size);
}

void* calloc(size_t count, size_t size) {
  size_t bytes = 0;
  note(__builtin_mul_overflow(count, size, &bytes) ? SIZE_MAX : bytes);
  return __libc_calloc(count, size);
}

void* realloc(void* ptr, size_t size) {
  note(size);
  return __libc_realloc(ptr, size);
}

void* memalign(size_t alignment, size_t size) {
  note(size);
  return __libc_memalign(alignment, size);
}

void* aligned_alloc(size_t alignment, size_t size) {
  note(size);
  if (!valid_alignment(alignment)) {
    errno = EINVAL;
    return nullptr;
  }
  return __libc_memalign(alignment, size);
}

// noexcept as glibc's <stdlib.h> and GCC's <mm_malloc.h> declare it (LibTorch 2.11's headers
// include the latter; a unity batch may see this definition first).
int posix_memalign(void** out, size_t alignment, size_t size) noexcept {
  note(size);
  if (!valid_alignment(alignment) || alignment % sizeof(void*) != 0) return EINVAL;
  void* p = __libc_memalign(alignment, size);
  if (p == nullptr && size != 0) return ENOMEM;
  *out = p;
  return 0;
}

}  // extern "C"

namespace vescale::testing {

AllocationMeter::AllocationMeter() {
  g_largest.store(0);
  g_total.store(0);
  g_calls.store(0);
  g_armed.store(true);
}

AllocationMeter::~AllocationMeter() {
  g_armed.store(false);
}

AllocationCounts AllocationMeter::counts() const {
  return {g_largest.load(), g_total.load(), g_calls.load()};
}

}  // namespace vescale::testing
