// Checks of command-line values that CLI11's own do not make: CLI::Range lets NaN through (every
// comparison with it is false) and an unsigned option takes "-1" as 2^64 - 1.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>

namespace vescale::app {

/// A finite number in [lo, hi]: NaN, inf and anything else are refused, naming the range.
CLI::Validator finite_in(double lo, double hi);
/// A whole number written without a sign, within 64 bits (a seed).
CLI::Validator unsigned_integer();
/// A whole number in [lo, hi], written as one (no fraction, no exponent, nothing after it); the
/// message names the range as written, not CLI::Range's 300-digit limits of a double.
CLI::Validator whole_in(int64_t lo, int64_t hi);

}  // namespace vescale::app
