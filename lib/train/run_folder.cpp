#include "train/run_folder.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "checkpoint/step_folders.h"
#include "core/error.h"
#include "train/metrics.h"
#include "train/run_id.h"

namespace vescale {
namespace {

namespace fs = std::filesystem;

/// The run id of a metrics.jsonl's first line; "" when it has none (a version before run ids)
/// or is not JSON.
std::string metrics_run_id(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return "";
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("run_id") || !j["run_id"].is_string()) return "";
  return j["run_id"].get<std::string>();
}

}  // namespace

void claim_metrics_file(const fs::path& path, const std::string& run_id,
                        std::optional<int64_t> resumed_from) {
  VS_USER_CHECK(!fs::is_symlink(path),
                "[metrics] {} is a symbolic link; metrics are never written through one. Remove "
                "it, or give this job another job.dump_folder",
                path.string());
  if (!fs::exists(path) || fs::is_empty(path)) return;
  const std::string other = metrics_run_id(path);
  if (other == run_id) {
    // This run, resumed: its lines go on from the checkpoint's step.
    if (resumed_from) drop_metrics_after(path, *resumed_from);
    return;
  }
  const std::string stem = "metrics." + (other.empty() ? std::string("earlier") : other);
  fs::path aside = path.parent_path() / (stem + ".jsonl");
  for (int n = 2; fs::exists(fs::symlink_status(aside)); ++n)
    aside = path.parent_path() / fmt::format("{}.{}.jsonl", stem, n);
  fs::rename(path, aside);
  spdlog::info("[metrics] {} held another run's lines ({}): moved to {}", path.string(),
               other.empty() ? "no run id" : "run " + other, aside.filename().string());
}

RunFolder::RunFolder(Job& job, const comm::Group& world, bool resumed, int64_t start_step) {
  const JobConfig& c = job.config();
  const fs::path folder = c.dump_folder;
  // Rank 0 decides; every rank learns the run id and whether rank 0 failed (and then throws too,
  // rather than wait in a collective rank 0 never joins).
  std::exception_ptr failure;
  std::string run_id = job.run_id;
  if (world.rank() == 0) {
    try {
      lock_ = FolderLock(folder);
      if (run_id.empty()) run_id = draw_run_id();
      claim_checkpoints_folder(checkpoints_folder(folder), run_id, resumed, c.checkpoint_overwrite,
                               start_step);
      metrics_path_ = (folder / "metrics.jsonl").string();
      claim_metrics_file(metrics_path_, run_id,
                         resumed ? std::optional<int64_t>(start_step) : std::nullopt);
    } catch (...) {
      failure = std::current_exception();
    }
  }
  const uint64_t id = run_id.empty() ? 0 : std::stoull(run_id, nullptr, 16);
  at::Tensor shared =
      at::tensor({failure ? int64_t{1} : int64_t{0}, static_cast<int64_t>(id)}, at::kLong)
          .to(world.device());
  world.broadcast(shared, 0);
  shared = shared.cpu();
  if (failure) std::rethrow_exception(failure);
  VS_USER_CHECK(shared[0].item<int64_t>() == 0,
                "[job] rank 0 could not claim {} for this run (its error says why)",
                folder.string());
  job.run_id = fmt::format("{:016x}", static_cast<uint64_t>(shared[1].item<int64_t>()));
  // Dumps say which run they are of: diagnose refuses to read two runs' dumps as one.
  if (world.flight()) world.flight()->set_run_id(job.run_id);
}

}  // namespace vescale
