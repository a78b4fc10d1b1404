// Step folders of a checkpoints folder (step-000200/): their names, and the committed ones in
// step order, compared as numbers (step-1000000 is newer than step-999999).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace vescale {

/// <dump_folder>/checkpoints: where a job's step folders, `latest` and nothing else go.
std::filesystem::path checkpoints_folder(const std::filesystem::path& dump_folder);

/// "step-000200" for step 200 (six digits or more).
std::string step_folder_name(int64_t step);

/// The step a folder name stands for ("step-1000000" -> 1000000); nullopt for any other name.
std::optional<int64_t> parse_step_folder(const std::string& name);

struct StepFolder {
  int64_t step = 0;
  std::filesystem::path path;
  bool committed = false;  ///< holds COMMIT
};

/// The step folders in `dir`, oldest first by step number (none if `dir` is not a folder).
std::vector<StepFolder> list_step_folders(const std::filesystem::path& dir);

/// Those of them that are committed, oldest first.
std::vector<StepFolder> committed_step_folders(const std::filesystem::path& dir);

/// Deletes a step folder, its COMMIT first (and that synced), so that a kill while deleting leaves
/// an uncommitted folder (ignored), never a committed one missing a rank file.
void remove_step_folder(const std::filesystem::path& folder);

}  // namespace vescale
