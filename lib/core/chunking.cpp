#include "core/chunking.h"

#include <algorithm>

#include "core/error.h"

namespace vescale {

std::vector<int64_t> chunk_sizes(int64_t size, int64_t parts) {
  VS_CHECK(parts > 0 && size >= 0, "[chunking] cannot split {} elements into {} parts", size,
           parts);
  const int64_t full = (size + parts - 1) / parts;
  std::vector<int64_t> sizes(parts);
  for (int64_t i = 0; i < parts; ++i) {
    sizes[i] = std::clamp<int64_t>(size - i * full, 0, full);
  }
  return sizes;
}

std::vector<int64_t> chunk_offsets(int64_t size, int64_t parts) {
  std::vector<int64_t> offsets;
  int64_t offset = 0;
  for (int64_t s : chunk_sizes(size, parts)) {
    offsets.push_back(offset);
    offset += s;
  }
  return offsets;
}

}  // namespace vescale
