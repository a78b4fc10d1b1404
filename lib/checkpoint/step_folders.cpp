#include "checkpoint/step_folders.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "core/safe_files.h"

namespace vescale {
namespace fs = std::filesystem;

std::filesystem::path checkpoints_folder(const std::filesystem::path& dump_folder) {
  return dump_folder / "checkpoints";
}

std::string step_folder_name(int64_t step) {
  return fmt::format("step-{:06d}", step);
}

std::optional<int64_t> parse_step_folder(const std::string& name) {
  const std::string prefix = "step-";
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0)
    return std::nullopt;
  int64_t step = 0;
  for (size_t i = prefix.size(); i < name.size(); ++i) {
    const char c = name[i];
    if (c < '0' || c > '9') return std::nullopt;
    if (step > (std::numeric_limits<int64_t>::max() - (c - '0')) / 10) return std::nullopt;
    step = step * 10 + (c - '0');
  }
  return step;
}

std::vector<StepFolder> list_step_folders(const fs::path& dir) {
  std::vector<StepFolder> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const auto step = parse_step_folder(e.path().filename().string());
    if (!step || !e.is_directory()) continue;
    out.push_back({*step, e.path(), fs::exists(e.path() / "COMMIT")});
  }
  std::sort(out.begin(), out.end(), [](const StepFolder& a, const StepFolder& b) {
    return a.step != b.step ? a.step < b.step : a.path < b.path;
  });
  return out;
}

std::vector<StepFolder> committed_step_folders(const fs::path& dir) {
  std::vector<StepFolder> out = list_step_folders(dir);
  out.erase(
      std::remove_if(out.begin(), out.end(), [](const StepFolder& s) { return !s.committed; }),
      out.end());
  return out;
}

void remove_step_folder(const fs::path& folder) {
  std::error_code ec;
  if (fs::remove(folder / "COMMIT", ec)) sync_to_disk(folder);
  fs::remove_all(folder);
}

}  // namespace vescale
