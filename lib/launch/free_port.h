#pragma once

namespace vescale {

/// A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it).
int find_free_port();

}  // namespace vescale
