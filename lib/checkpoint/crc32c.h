// CRC-32C (Castagnoli), the checksum each checkpoint dataset carries (NOTE [Checkpoint integrity]).
#pragma once

#include <cstddef>
#include <cstdint>

namespace vescale {

/// CRC-32C of `size` bytes, continuing from `crc` (0 to start): crc32c("123456789") = 0xE3069283.
uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);

}  // namespace vescale
