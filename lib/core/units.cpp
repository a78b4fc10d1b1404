#include "core/units.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>

#include "core/error.h"

namespace vescale {

int64_t parse_bytes(const std::string& text, const std::string& what) {
  size_t pos = 0;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos])))
    ++pos;
  std::string unit = text.substr(pos);
  int64_t shift = -1;
  if (unit.empty() || unit == "B") shift = 0;
  if (unit == "K" || unit == "KB" || unit == "KiB") shift = 10;
  if (unit == "M" || unit == "MB" || unit == "MiB") shift = 20;
  if (unit == "G" || unit == "GB" || unit == "GiB") shift = 30;
  VS_USER_CHECK(pos > 0 && shift >= 0,
                "[units] bad {} '{}': expected a whole number with an optional unit B, K, M or G "
                "(e.g. 512, 1K, 16M)",
                what, text);
  // At most 2^53 bytes (8 PiB): no shift or conversion past int64 (nor past a double's exact
  // integers, where the sizes are compared).
  const std::string digits = text.substr(0, pos);
  constexpr int64_t kMax = int64_t{1} << 53;
  VS_USER_CHECK(digits.size() <= 16 && std::stoll(digits) <= (kMax >> shift),
                "[units] {} '{}' is too large: at most 8 PiB ({} bytes)", what, text, kMax);
  return std::stoll(digits) << shift;
}

std::vector<int64_t> parse_byte_list(const std::string& text, const std::string& what) {
  std::vector<int64_t> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    out.push_back(parse_bytes(text.substr(start, end - start), what));
    start = end + 1;
  }
  return out;
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (!std::isfinite(bytes)) return fmt::format("{}B", bytes);
  int u = 0;
  while (std::fabs(bytes) >= 1024.0 && u < 6) {
    bytes /= 1024.0;
    ++u;
  }
  // Past EiB the figure is printed in exponent form, never cast to an integer it does not fit.
  if (std::fabs(bytes) >= 1024.0) return fmt::format("{:.3g}{}", bytes, units[u]);
  if (u == 0) return fmt::format("{}B", static_cast<int64_t>(bytes));
  if (bytes == std::floor(bytes)) return fmt::format("{}{}", static_cast<int64_t>(bytes), units[u]);
  return fmt::format("{:.1f}{}", bytes, units[u]);
}

std::string format_duration(double seconds) {
  if (seconds >= 3600) {
    auto s = static_cast<int64_t>(seconds);
    return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  }
  if (seconds >= 60) {
    auto s = static_cast<int64_t>(seconds);
    return fmt::format("{}m{:02}s", s / 60, s % 60);
  }
  if (seconds >= 1) return fmt::format("{:.1f}s", seconds);
  if (seconds >= 1e-3) return fmt::format("{:.2f}ms", seconds * 1e3);
  if (seconds < 0.05e-6) return "0s";  // nothing, not "0.0us"
  return fmt::format("{:.1f}us", seconds * 1e6);
}

}  // namespace vescale
