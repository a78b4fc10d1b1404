#include "core/config_value.h"

#include <fmt/format.h>

#include <cmath>

namespace vescale {

bool ConfigRange::contains(double v) const {
  const bool above_lo = lo_open ? v > lo : v >= lo;
  const bool below_hi = hi_open ? v < hi : v <= hi;
  return above_lo && below_hi;
}

std::string ConfigRange::str() const {
  const bool bounded_lo = std::isfinite(lo), bounded_hi = std::isfinite(hi);
  if (bounded_lo && bounded_hi)
    return fmt::format("in {}{}, {}{}", lo_open ? "(" : "[", lo, hi, hi_open ? ")" : "]");
  if (bounded_lo) return fmt::format("{} {}", lo_open ? ">" : ">=", lo);
  if (bounded_hi) return fmt::format("{} {}", hi_open ? "<" : "<=", hi);
  return "any number";
}

}  // namespace vescale
