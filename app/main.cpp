// vescale-train: train models on a pp x dp x tp mesh with single-device numbers.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "comm/group.h"
#include "commands/commands.h"
#include "core/blas_core.h"
#include "core/error.h"
#include "core/logging.h"
#include "core/quick_exit.h"
#include "kernels/kernel_table.h"

namespace {

constexpr const char* kVersion = "0.1.0";

/// The subcommand table: name order is the order of `--help`.
struct CommandEntry {
  void (*add)(CLI::App&, const vescale::app::Invocation&);
};
const CommandEntry kCommands[] = {
    {vescale::app::add_train_command},    {vescale::app::add_eval_command},
    {vescale::app::add_generate_command}, {vescale::app::add_checkpoint_commands},
    {vescale::app::add_export_command},   {vescale::app::add_plan_command},
    {vescale::app::add_config_command},   {vescale::app::add_comm_command},
    {vescale::app::add_diagnose_command}, {vescale::app::add_tokenizer_command},
    {vescale::app::add_data_command},
};

int run(int argc, char** argv) {
  vescale::app::Invocation invocation;
  invocation.argv.assign(argv, argv + argc);

  CLI::App app{
      "vescale-train: train models on a pp x dp x tp device mesh and get the numbers of a "
      "single-device run"};
  // The version, the LibTorch it was built with and the fast paths built in (NOTE [Fast paths]).
  app.set_version_flag("--version",
                       fmt::format("vescale-train {}\n{}", kVersion,
                                   vescale::kernels::build_summary(vescale::comm::nccl_version())));
  // Logs go to stderr from the start; --log-level applies as soon as it is parsed.
  vescale::init_logging({0, 1, false, invocation.log_level});
  app.add_option("--log-level", invocation.log_level, "trace, debug, info, warn or error")
      ->capture_default_str()
      ->each([](const std::string& level) {
        vescale::init_logging({0, 1, false, level});
      });
  app.require_subcommand(1);
  for (const auto& command : kCommands)
    command.add(app, invocation);

  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();  // a command's own exit code (e.g. a worker's), already reported
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // A usage mistake: one `error:` line and exit 2, like every other bad input.
    std::fprintf(stderr, "error: %s\nRun with --help for more information.\n", e.what());
    return 2;
  } catch (const vescale::UserError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const vescale::DivergedError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  vescale::blas::choose_kernels_or_restart(argc, argv);  // NOTE [BLAS kernels]: before anything
  vescale::exit_flushed(run(argc, argv));
}  // NOTE [Quick exit]
