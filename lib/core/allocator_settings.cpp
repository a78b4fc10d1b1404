#include "core/allocator_settings.h"

#include <cstdlib>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace vescale {

std::string apply_allocator_settings() {
#if defined(__GLIBC__)
  for (const char* name : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_"})
    if (std::getenv(name) != nullptr)
      return std::string("[alloc] glibc malloc as the environment sets it (") + name +
             " is set; NOTE [Allocator settings])";
  constexpr int kMiB = 1 << 20;
  const bool ok = mallopt(M_MMAP_THRESHOLD, 32 * kMiB) == 1 &&
                  mallopt(M_TRIM_THRESHOLD, 1024 * kMiB) == 1 && mallopt(M_TOP_PAD, 64 * kMiB) == 1;
  return ok ? "[alloc] glibc malloc keeps freed memory: mmap threshold 32 MiB, trim threshold "
              "1 GiB, top pad 64 MiB (MALLOC_*_ variables override)"
            : "[alloc] glibc malloc refused the settings; its defaults stay";
#else
  return "[alloc] not glibc: the C library allocator keeps its defaults";
#endif
}

}  // namespace vescale
