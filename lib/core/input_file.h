#pragma once
// Reading a user's input file (a config, a plan) without trusting it: it must be a regular file
// (not a FIFO, a device such as /dev/zero, or a directory, which would hang or never end) and
// small enough to be what it claims to be.

#include <cstdint>
#include <string>

namespace vescale {

/// The largest config or plan file read: far above any real one.
inline constexpr int64_t kMaxInputFileBytes = 16 << 20;

/// The whole text of `path`. `what` names it in errors ("config", "plan"). Throws UserError if
/// it is missing, not a regular file, larger than `max_bytes`, or unreadable.
std::string read_input_file(const std::string& path, const std::string& what,
                            int64_t max_bytes = kMaxInputFileBytes);

/// Throws UserError unless `path` is a regular file (symlinks followed). For files read by
/// other means (HDF5, mmap).
void require_regular_file(const std::string& path, const std::string& what);

}  // namespace vescale
