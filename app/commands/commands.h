// The subcommands of vescale-train: each adds itself to the CLI with its options and help.
#pragma once

#include <CLI/CLI.hpp>

#include "runtime.h"

namespace vescale::app {

/// `vescale-train train CONFIG.toml`: the training job.
void add_train_command(CLI::App& app, const Invocation& invocation);
/// `vescale-train eval CONFIG.toml --checkpoint PATH`: validation loss of a checkpoint.
void add_eval_command(CLI::App& app, const Invocation& invocation);
/// `vescale-train generate CONFIG.toml --checkpoint PATH`: text sampled from a checkpoint.
void add_generate_command(CLI::App& app, const Invocation& invocation);
/// `vescale-train plan list | show | lint`: the plan zoo and plan checks.
void add_plan_command(CLI::App& app, const Invocation& invocation);
/// `vescale-train plan auto CONFIG.toml --nproc N`: layouts ranked by the cost model.
void add_plan_auto_command(CLI::App& plan);
/// `vescale-train merge` and `inspect`: checkpoint tools.
void add_checkpoint_commands(CLI::App& app, const Invocation& invocation);
/// `vescale-train export CHECKPOINT -o DIR --format hf`: a Hugging Face model folder.
void add_export_command(CLI::App& app, const Invocation& invocation);
/// `vescale-train config reference`: every config key, from the schema.
void add_config_command(CLI::App& app, const Invocation& invocation);
/// `vescale-train comm ...`: communication checks (comm bench).
void add_comm_command(CLI::App& app, const Invocation& invocation);
/// `vescale-train diagnose FOLDER`: the flight recorder dumps of a job, diagnosed.
void add_diagnose_command(CLI::App& app, const Invocation& invocation);
/// `vescale-train data prepare FILES... -o DIR`: token files (NOTE [Token files]).
void add_data_command(CLI::App& app, const Invocation& invocation);
/// `vescale-train tokenizer train | encode | decode`: tokenizers (NOTE [Tokenizers]).
void add_tokenizer_command(CLI::App& app, const Invocation& invocation);

}  // namespace vescale::app
