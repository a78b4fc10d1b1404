// The target id of a token the loss leaves out (NOTE [Loss masks]).
#pragma once

#include <cstdint>

namespace vescale {

/// A next-token target the cross entropy skips: no loss, no gradient (PyTorch's ignore_index).
inline constexpr int64_t kIgnoreTarget = -100;

}  // namespace vescale
