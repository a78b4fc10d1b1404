#include "checkpoint/checkpoint_merge.h"

#include <filesystem>
#include <system_error>

#include "checkpoint/checkpoint_format.h"
#include "core/error.h"
#include "core/safe_files.h"

namespace vescale {
namespace fs = std::filesystem;
using detail::full_piece;
using detail::link_aliases;
using detail::stamp_dataset_count;
using detail::write_meta;
using detail::write_piece;

int64_t merge_checkpoint(const CheckpointReader& reader, const std::string& output,
                         bool model_only) {
  VS_USER_CHECK(!output.empty() && fs::path(output).has_filename(),
                "merge: -o '{}' is not a file name; give the merged file to write, e.g. "
                "-o model.h5",
                output);
  const fs::path folder = fs::absolute(output).parent_path();
  VS_USER_CHECK(fs::is_directory(folder), "merge: -o {}: no folder {} to write it in", output,
                folder.string());
  VS_USER_CHECK(!path_taken(output), "merge: {} exists; not overwriting it", output);
  const std::string tmp = output + ".tmp";
  remove_stale(tmp);
  int64_t written = 0;
  try {
    h5::File file = h5::File::create(tmp);
    CheckpointMeta meta = reader.meta();
    meta.format = "merged";
    write_meta(file, meta);
    for (const auto& name : reader.names()) {
      if (model_only && name.rfind("model/", 0) != 0) continue;
      write_piece(file, full_piece(name, reader.read_full(name)));
      ++written;
    }
    link_aliases(file, reader.aliases());
    stamp_dataset_count(file);
    file.close();
    sync_to_disk(tmp);
    // The output is checked again just before the rename: a link made meanwhile is refused, not
    // replaced (rename itself would replace the link, never write through it).
    VS_USER_CHECK(!path_taken(output), "merge: {} exists; not overwriting it", output);
    fs::rename(tmp, output);
  } catch (...) {
    std::error_code ignored;
    fs::remove(tmp, ignored);  // no half-written file left behind
    throw;
  }
  sync_to_disk(folder);
  return written;
}

}  // namespace vescale
