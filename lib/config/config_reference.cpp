#include "config/config_reference.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config/config_schema.h"
#include "config/toml_value.h"

namespace vescale {
namespace {

std::string section_of(const ConfigKey& k) {
  return k.name.substr(0, k.name.find('.'));
}

/// "[model] (gpt)" for a family's keys, "[training]" otherwise.
std::string heading_of(const ConfigKey& k) {
  if (k.families.empty()) return fmt::format("[{}]", section_of(k));
  return fmt::format("[{}] ({})", section_of(k), fmt::join(k.families, ", "));
}

/// A table cell: `|` would end it.
std::string cell(const std::string& text) {
  std::string out;
  for (char ch : text)
    out += ch == '|' ? std::string("\\|") : std::string(1, ch);
  return out;
}

}  // namespace

std::string config_reference_markdown() {
  std::string out, heading;
  for (const ConfigKey& k : config_schema()) {
    if (heading_of(k) != heading) {
      heading = heading_of(k);
      out += fmt::format(
          "{}### {}\n\n| key | type | default | accepts | meaning |\n"
          "| --- | --- | --- | --- | --- |\n",
          out.empty() ? "" : "\n", heading);
    }
    out += fmt::format("| `{}` | {} | `{}` | {} | {} |\n", k.name, type_name(k.default_value),
                       cell(toml_literal(k.default_value)), k.range ? k.range->str() : "",
                       cell(k.help));
  }
  return out;
}

}  // namespace vescale
