// Writing a whole buffer to a file descriptor: write(2) may take only part of it, or be
// interrupted by a signal before it writes anything.
#pragma once

#include <string_view>

namespace vescale {

/// Writes all of `text` to `fd`, retrying short writes and EINTR. False on any other failure
/// (errno says why).
bool write_fully(int fd, std::string_view text);

}  // namespace vescale
