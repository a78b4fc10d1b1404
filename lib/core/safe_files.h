// The file operations checkpoints, flight dumps, exports and every other output are written with
// (NOTE [Checkpoint integrity]): temporaries created exclusively, never through a symbolic link;
// modes at most 0644 / 0755 (less if the umask says so); data and folders synced to disk before
// anything points at them.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace vescale {

constexpr unsigned kCheckpointFileMode = 0644;
constexpr unsigned kCheckpointFolderMode = 0755;

/// Removes whatever `path` names (a stale temporary from a crash, or a symbolic link planted
/// there: the link, never its target) so that `path` can be created exclusively.
void remove_stale(const std::filesystem::path& path);

/// Takes from a file this process just created any permission beyond 0644 (opened with O_NOFOLLOW:
/// a link swapped in is refused, not followed).
void set_file_mode(const std::filesystem::path& path);

/// Flushes a file's (or a folder's) data to the disk: a checkpoint is committed only once its
/// files would survive a power cut, not just a crash of the program.
void sync_to_disk(const std::filesystem::path& path);

/// Writes `text` to `path` through `path`.tmp (created with O_CREAT | O_EXCL | O_NOFOLLOW, mode
/// 0644), synced, renamed over `path`, and the folder synced.
void write_text_atomically(const std::filesystem::path& path, const std::string& text);

/// Creates `path` (and missing parents) with mode 0755; refuses a symbolic link at `path`.
void make_folder(const std::filesystem::path& path);

/// True if anything is at `path`, a dangling symbolic link included.
bool path_taken(const std::filesystem::path& path);

/// Throws UserError when `output` is one of `inputs` as a file, not as a name: ./x, dir/../x and
/// a symbolic or hard link to x are all x. No command writes over what it reads. `what` starts
/// the message ("tokenizer train").
void refuse_writing_over_inputs(const std::filesystem::path& output,
                                const std::vector<std::string>& inputs, const std::string& what);

/// NOTE [Foreign outputs]: a command replaces an existing output only where it is the command's
/// own kind of file, one that this tool wrote (a config `plan auto` wrote, calibration JSON,
/// token files beside our meta.json); anything else there (a hand-written config, notes, a
/// nanoGPT folder's train.bin) needs `overwrite` (the command's --overwrite). Throws UserError
/// naming `output`, what it is not (`kind`: "a config plan auto wrote") and --overwrite; `what`
/// starts the message ("plan auto -o"). Nothing at `output`, or `is_ours(output)`: no error.
void refuse_replacing_foreign(const std::filesystem::path& output, bool overwrite,
                              const std::function<bool(const std::filesystem::path&)>& is_ours,
                              const std::string& what, const std::string& kind);

}  // namespace vescale
