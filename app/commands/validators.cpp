#include "commands/validators.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>
#include <string>

namespace vescale::app {

CLI::Validator finite_in(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        size_t used = 0;
        double value = std::nan("");
        try {
          value = std::stod(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == text.size() && !text.empty() && std::isfinite(value) && lo <= value &&
            value <= hi)
          return "";
        return fmt::format("'{}' is not a finite number in [{:g}, {:g}]", text, lo, hi);
      },
      fmt::format("FLOAT in [{:g}, {:g}]", lo, hi));
}

CLI::Validator unsigned_integer() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const bool digits = !text.empty() && text.size() <= 20 &&
                            text.find_first_not_of("0123456789") == std::string::npos;
        if (digits) {
          try {
            (void)std::stoull(text);
            return "";
          } catch (const std::exception&) {
          }
        }
        return fmt::format("'{}' is not a whole number in [0, 2^64 - 1]", text);
      },
      "UINT");
}

CLI::Validator whole_in(int64_t lo, int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        size_t used = 0;
        long long value = 0;
        bool ok = false;
        try {
          value = std::stoll(text, &used);
          ok = used == text.size() && !text.empty();
        } catch (const std::exception&) {
        }
        if (ok && lo <= value && value <= hi) return "";
        return fmt::format("'{}' is not a whole number in [{}, {}]", text, lo, hi);
      },
      fmt::format("INT in [{}, {}]", lo, hi));
}

}  // namespace vescale::app
