#include "checkpoint/checkpoint_commit.h"

#include <fmt/format.h>

#include <vector>

#include "checkpoint/step_folders.h"
#include "core/error.h"
#include "core/safe_files.h"

namespace vescale::detail {
namespace fs = std::filesystem;

fs::path prepare_folder(const std::string& dir, const CheckpointMeta& meta,
                        const comm::Group& world) {
  const fs::path folder = fs::path(dir) / step_folder_name(meta.step);
  if (world.rank() == 0) {
    VS_USER_CHECK(!fs::exists(folder / "COMMIT"),
                  "[checkpoint] {} is already committed; not overwriting it", folder.string());
    // An uncommitted folder of this step is a save a crash cut short: start it afresh, so no
    // file of that attempt (a rank file of another world size) outlives it.
    if (path_taken(folder)) remove_stale(folder);
    make_folder(folder);
  }
  world.barrier();
  return folder;
}

void commit(const fs::path& dir, const fs::path& folder, const CheckpointMeta& meta, int64_t keep,
            const comm::Group& group) {
  group.barrier();
  if (group.rank() == 0) {
    sync_to_disk(folder);  // the renames of the files into it
    write_text_atomically(folder / "COMMIT",
                          fmt::format("step {}\nformat {}\n", meta.step, meta.format));
    write_text_atomically(dir / "latest", step_folder_name(meta.step) + "\n");
    if (keep > 0) {
      const std::vector<StepFolder> committed = committed_step_folders(dir);  // by step number
      for (size_t i = 0; i + static_cast<size_t>(keep) < committed.size(); ++i)
        remove_step_folder(committed[i].path);
    }
  }
  group.barrier();
}

}  // namespace vescale::detail
