// The subcommands of vescale-train: each adds itself to the CLI with its options and help.
#pragma once

#include <CLI/CLI.hpp>

#include "runtime.h"

namespace vescale::app {

/// `vescale-train comm ...`: communication checks (comm bench).
void add_comm_command(CLI::App& app, const Invocation& invocation);

}  // namespace vescale::app
