// The config reference: every key of the schema as Markdown tables, one per section, with its
// type, default, the values it accepts and its meaning. `vescale-train config reference` prints
// it and docs/configuration.md holds it (a test checks that the two agree), so the
// documentation cannot drift from the schema.
#pragma once

#include <string>

namespace vescale {

/// The reference as Markdown: a `### [section]` heading and a table per section; the [model]
/// keys of each family under their own heading.
std::string config_reference_markdown();

}  // namespace vescale
