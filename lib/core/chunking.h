// How a dimension is split across ranks: torch.chunk semantics, the rule for uneven sharding.
#pragma once

#include <cstdint>
#include <vector>

namespace vescale {

/// Sizes of the `parts` pieces of a dimension of `size` under torch.chunk: every piece but the
/// trailing ones has ceil(size / parts) elements; trailing pieces may be smaller or empty.
/// E.g. chunk_sizes(5, 4) = {2, 2, 1, 0}.
std::vector<int64_t> chunk_sizes(int64_t size, int64_t parts);

/// Offsets of the pieces of chunk_sizes(size, parts).
std::vector<int64_t> chunk_offsets(int64_t size, int64_t parts);

}  // namespace vescale
