// `vescale-train config reference`: every config key, from the schema.
#include <cstdio>
#include <string>

#include "commands.h"
#include "config/config_reference.h"

namespace vescale::app {

void add_config_command(CLI::App& app, const Invocation& /*invocation*/) {
  CLI::App* config = app.add_subcommand("config", "What a job config may hold");
  config->require_subcommand(1);
  CLI::App* reference = config->add_subcommand(
      "reference",
      "Print every config key with its type, default, the values it accepts and its meaning, as "
      "Markdown tables by section (docs/configuration.md holds the same). A config's own values: "
      "train CONFIG.toml --print-config");
  reference->callback([] {
    const std::string text = config_reference_markdown();
    std::fwrite(text.data(), 1, text.size(), stdout);
  });
}

}  // namespace vescale::app
