// The values a config key takes, and the numbers a numeric key accepts: the vocabulary that the
// job config's schema and the model families' keys share.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <variant>
#include <vector>

namespace vescale {

/// A key's value. A list of strings is written as a TOML array (`["a", "b"]`, also on the
/// command line); a plain string is accepted as a list of one and a list of one prints as a string.
using ConfigValue = std::variant<int64_t, double, bool, std::string, std::vector<std::string>,
                                 std::vector<int64_t>>;

/// `v` as people write it: the shortest text that reads back as `v` (0.0003, 0.9, 1e-8), a run
/// of six or more trailing zeros as an exponent (1e12), never float noise (0.1, not
/// 0.10000000000000001).
std::string number_text(double v);

/// The numbers a numeric key accepts: from lo to hi, either end open or unbounded.
struct ConfigRange {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false, hi_open = false;

  bool contains(double v) const;
  /// ">= 1", "> 0", "in [0, 1)".
  std::string str() const;
};

// The ranges of numeric keys: what makes sense, so that a typo (beta2 = 2, eps = 0, n_embd = 0,
// a negative interval) is a config error at its line rather than a NaN or a hang later.
inline ConfigRange at_least(double lo) {
  return {lo};
}
inline ConfigRange above(double lo) {
  return {lo, ConfigRange{}.hi, true};
}
inline ConfigRange within(double lo, double hi) {
  return {lo, hi};
}
inline ConfigRange within_open_lo(double lo, double hi) {
  return {lo, hi, true};
}
inline ConfigRange half_open(double lo, double hi) {
  return {lo, hi, false, true};
}
inline ConfigRange open_unit() {
  return {0, 1, true, true};
}

}  // namespace vescale
