#include "train/run_id.h"

#include <fmt/format.h>

#include <random>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/step_folders.h"
#include "core/error.h"
#include "core/logging.h"

namespace vescale {

std::string draw_run_id() {
  std::random_device device;
  const uint64_t id = (uint64_t{device()} << 32) ^ uint64_t { device() };
  return fmt::format("{:016x}", id);
}

void claim_checkpoints_folder(const std::filesystem::path& dir, const std::string& run_id,
                              bool resuming, bool overwrite, int64_t start_step) {
  std::vector<StepFolder> foreign, newer;
  std::string other_run;
  for (const StepFolder& s : committed_step_folders(dir)) {
    std::string id = "(unreadable)";
    try {
      id = read_checkpoint_meta(s.path.string()).run_id;
    } catch (const UserError&) {
    }
    if (id == run_id || (resuming && id.empty())) {
      if (s.step > start_step) newer.push_back(s);
      continue;
    }
    foreign.push_back(s);
    other_run = id.empty() ? "(written before run ids)" : id;
  }
  VS_USER_CHECK(foreign.empty() || overwrite,
                "[checkpoint] {} holds {} committed step{} of another run ({}, newest {}); this "
                "run ({}) would mix its steps with them. Resume that run with checkpoint.load = "
                "\"latest\", give this run another job.dump_folder, or set checkpoint.overwrite = "
                "true to delete them",
                dir.string(), foreign.size(), foreign.size() == 1 ? "" : "s", other_run,
                foreign.empty() ? "" : foreign.back().path.filename().string(), run_id);
  VS_USER_CHECK(newer.empty() || overwrite,
                "[checkpoint] {} holds {} committed step{} of this run newer than step {}, which "
                "this job resumes from (newest {}): training on would save over them. Resume "
                "from the newest with checkpoint.load = \"latest\", move them out of the folder, "
                "or set checkpoint.overwrite = true to delete them now",
                dir.string(), newer.size(), newer.size() == 1 ? "" : "s", start_step,
                newer.empty() ? "" : newer.back().path.filename().string());
  const auto remove_all = [](const std::vector<StepFolder>& steps, const std::string& why) {
    for (const StepFolder& s : steps) {
      spdlog::warn("[checkpoint] checkpoint.overwrite: deleting {}{}", s.path.string(), why);
      remove_step_folder(s.path);
    }
  };
  remove_all(foreign, " of another run");
  remove_all(newer, fmt::format(", newer than step {} (a rollback)", start_step));
}

}  // namespace vescale
