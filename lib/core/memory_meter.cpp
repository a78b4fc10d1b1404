#include "core/memory_meter.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/alignment.h>

#include <atomic>
#include <limits>
#include <new>

#include "core/error.h"
#include "core/version_guards.h"

namespace vescale {
namespace {

// NOTE [Memory meter]
// Each allocation of n bytes takes n + kHeaderBytes from the wrapped allocator and puts a header
// in front of the data: n, and the wrapped allocation's own context and deleter. The data
// pointer is then also the context, so c10's raw interface (raw_allocate / raw_deallocate, which
// oneDNN uses) keeps working, and a free needs no lookup. Only pointers this wrapper handed out
// carry its deleter, so frees of memory allocated before install are never subtracted.
struct Header {
  int64_t bytes;
  void* wrapped_context;
  c10::DeleterFnPtr wrapped_deleter;
};
// One alignment unit, so that the data keeps the wrapped allocator's alignment.
constexpr size_t kHeaderBytes = c10::gAlignment;
static_assert(sizeof(Header) <= kHeaderBytes, "the header must fit in one alignment unit");

std::atomic<int64_t> live_bytes{0};
std::atomic<int64_t> peak_bytes{0};
std::atomic<bool> installed{false};
std::atomic<int64_t> tensor_allocations{0};
// The most bytes of a 0-dim tensor (a complex double): ATen wraps host scalars in such tensors.
constexpr size_t kScalarBytes = 16;

void raise_peak(int64_t live) {
  int64_t peak = peak_bytes.load(std::memory_order_relaxed);
  while (live > peak && !peak_bytes.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
}

void metered_delete(void* data) {
  if (data == nullptr) return;
  const Header header = *reinterpret_cast<Header*>(static_cast<char*>(data) - kHeaderBytes);
  live_bytes.fetch_sub(header.bytes, std::memory_order_relaxed);
  // As the wrapped DataPtr would have: no deleter call for no context.
  if (header.wrapped_context != nullptr) header.wrapped_deleter(header.wrapped_context);
}

// c10::Allocator::allocate is const up to LibTorch 2.2 (NOTE [Version guards]).
#if VESCALE_ALLOCATOR_HAS_COPY_DATA
#define VESCALE_ALLOCATE_CONST
#else
#define VESCALE_ALLOCATE_CONST const
#endif

class MeteredAllocator final : public c10::Allocator {
 public:
  explicit MeteredAllocator(c10::Allocator* wrapped) : wrapped_(wrapped) {}

  c10::DataPtr allocate(size_t n) VESCALE_ALLOCATE_CONST override {
    // Like c10's default: no memory for no bytes (and still this deleter, as raw_deleter promises).
    if (n == 0) return {nullptr, nullptr, &metered_delete, c10::Device(c10::DeviceType::CPU)};
    c10::DataPtr wrapped = wrapped_->allocate(n + kHeaderBytes);
    const c10::Device device = wrapped.device();
    char* base = static_cast<char*>(wrapped.get());
    const c10::DeleterFnPtr deleter = wrapped.get_deleter();
    void* context = wrapped.release_context();  // the header owns it from here
    new (base) Header{static_cast<int64_t>(n), context, deleter};
    raise_peak(live_bytes.fetch_add(static_cast<int64_t>(n), std::memory_order_relaxed) +
               static_cast<int64_t>(n));
    if (n > kScalarBytes) tensor_allocations.fetch_add(1, std::memory_order_relaxed);
    void* data = base + kHeaderBytes;
    return {data, data, &metered_delete, device};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &metered_delete; }

#if VESCALE_ALLOCATOR_HAS_COPY_DATA
  // Plain host memory, as the wrapped CPU allocator's.
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
#endif

 private:
  c10::Allocator* wrapped_;
};

}  // namespace

void install_memory_meter() {
  // Static: allocations outlive any scope, and c10 does not own the allocators it is given.
  static MeteredAllocator* const meter = [] {
    auto* allocator = new MeteredAllocator(c10::GetCPUAllocator());
    c10::SetCPUAllocator(allocator, std::numeric_limits<uint8_t>::max());
    return allocator;
  }();
  VS_CHECK(c10::GetCPUAllocator() == meter,
           "[memory] the CPU allocator was not replaced by the memory meter");
  installed.store(true);
}

bool memory_meter_installed() {
  return installed.load();
}

int64_t metered_tensor_allocations() {
  return tensor_allocations.load(std::memory_order_relaxed);
}

int64_t metered_live_bytes() {
  return live_bytes.load(std::memory_order_relaxed);
}

int64_t metered_peak_bytes() {
  return peak_bytes.load(std::memory_order_relaxed);
}

void reset_metered_peak() {
  peak_bytes.store(metered_live_bytes(), std::memory_order_relaxed);
}

}  // namespace vescale
