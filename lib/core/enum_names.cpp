#include "core/enum_names.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/suggest.h"

namespace vescale {

std::string choice_list(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " or " : ", ";
    out += names[i];
  }
  return out;
}

namespace detail {

void throw_unknown_name(const std::string& what, const std::string& text,
                        const std::vector<std::string>& names) {
  // "[comm] backend" -> "[comm] unknown backend"; "backend" -> "unknown backend".
  const size_t area = what.rfind("] ");
  const std::string prefix = area == std::string::npos ? "" : what.substr(0, area + 2);
  const std::string noun = area == std::string::npos ? what : what.substr(area + 2);
  throw UserError(fmt::format("{}unknown {} '{}': use {}{}", prefix, noun, text, choice_list(names),
                              did_you_mean(text, names)));
}

}  // namespace detail
}  // namespace vescale
