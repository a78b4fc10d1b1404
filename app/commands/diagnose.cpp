// `vescale-train diagnose FOLDER`: where the ranks of a hung or failed job diverged, from their
// flight recorder dumps (NOTE [Flight recorder]).
#include <cstdio>
#include <string>

#include "comm/flight_diagnosis.h"
#include "commands.h"

namespace vescale::app {

void add_diagnose_command(CLI::App& app, const Invocation& /*invocation*/) {
  auto folder = std::make_shared<std::string>();
  CLI::App* diagnose = app.add_subcommand(
      "diagnose",
      "Say where the ranks of a job diverged from their flight recorder dumps "
      "(<dump_folder>/flight/rank-N.json: written when a collective fails or times out, on "
      "SIGUSR1, when stuck after SIGTERM, or after the step comm.flight_recorder_dump): per "
      "group, which sequence number each rank reached and the first collective on which they "
      "diverge. The local launcher prints the same when a job fails; this is for torchrun and "
      "Slurm runs");
  diagnose->add_option("folder", *folder, "The job's dump folder, or its flight folder")
      ->required();
  diagnose->callback([folder] {
    const std::string text = comm::diagnose_flight(*folder);
    std::fwrite(text.data(), 1, text.size(), stdout);
  });
}

}  // namespace vescale::app
