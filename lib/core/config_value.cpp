#include "core/config_value.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace vescale {

std::string number_text(double v) {
  std::string text = fmt::format("{}", v);  // shortest round trip: 0.0003, 1e-08, 65536
  const size_t e = text.find('e');
  if (e != std::string::npos) {
    // "1e-08" -> "1e-8", "1e+20" -> "1e20"
    std::string mantissa = text.substr(0, e), exponent = text.substr(e + 1);
    const bool negative = exponent[0] == '-';
    if (exponent[0] == '-' || exponent[0] == '+') exponent.erase(0, 1);
    exponent.erase(0, std::min(exponent.find_first_not_of('0'), exponent.size() - 1));
    return mantissa + "e" + (negative ? "-" : "") + exponent;
  }
  if (text.find_first_not_of("-0123456789") != std::string::npos) return text;  // 0.5, inf
  const size_t digits = text.find_last_not_of('0') + 1;
  const size_t zeros = text.size() - digits;
  if (zeros < 6) return text;
  std::string mantissa = text.substr(0, digits);
  const size_t first = mantissa[0] == '-' ? 1 : 0;
  const size_t exponent = zeros + mantissa.size() - first - 1;
  if (mantissa.size() - first > 1) mantissa.insert(first + 1, ".");
  return fmt::format("{}e{}", mantissa, exponent);  // 1000000000000 -> 1e12, 25000000 -> 2.5e7
}

bool ConfigRange::contains(double v) const {
  const bool above_lo = lo_open ? v > lo : v >= lo;
  const bool below_hi = hi_open ? v < hi : v <= hi;
  return above_lo && below_hi;
}

std::string ConfigRange::str() const {
  const bool bounded_lo = std::isfinite(lo), bounded_hi = std::isfinite(hi);
  if (bounded_lo && bounded_hi)
    return fmt::format("in {}{}, {}{}", lo_open ? "(" : "[", number_text(lo), number_text(hi),
                       hi_open ? ")" : "]");
  if (bounded_lo) return fmt::format("{} {}", lo_open ? ">" : ">=", number_text(lo));
  if (bounded_hi) return fmt::format("{} {}", hi_open ? "<" : "<=", number_text(hi));
  return "any number";
}

}  // namespace vescale
