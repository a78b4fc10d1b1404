#include "core/safe_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "core/write_fully.h"

namespace vescale {
namespace fs = std::filesystem;

bool path_taken(const fs::path& path) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(path, ec));
}

void refuse_writing_over_inputs(const fs::path& output, const std::vector<std::string>& inputs,
                                const std::string& what) {
  std::error_code ec;
  if (!fs::exists(output, ec)) return;
  for (const std::string& input : inputs) {
    VS_USER_CHECK(!fs::equivalent(output, input, ec),
                  "{}: {} is the input {}; name another output (nothing was written)", what,
                  output.string(), input);
  }
}

void refuse_replacing_foreign(const fs::path& output, bool overwrite,
                              const std::function<bool(const fs::path&)>& is_ours,
                              const std::string& what, const std::string& kind) {
  if (overwrite || !path_taken(output)) return;
  bool ours = false;
  try {
    ours = is_ours(output);
  } catch (const std::exception&) {  // unreadable or not of our kind: not ours
  }
  VS_USER_CHECK(ours,
                "{} {}: the file exists and is not {}; pass --overwrite to replace it (nothing "
                "was written)",
                what, output.string(), kind);
}

void remove_stale(const fs::path& path) {
  std::error_code ec;
  if (fs::is_directory(fs::symlink_status(path, ec))) {
    fs::remove_all(path, ec);
  } else {
    fs::remove(path, ec);  // a symbolic link itself, not what it points at
  }
  VS_USER_CHECK(!path_taken(path), "[checkpoint] cannot remove the stale {}: {}", path.string(),
                ec ? ec.message() : "it came back");
}

void set_file_mode(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  VS_USER_CHECK(fd >= 0, "[checkpoint] cannot open {} (a symbolic link planted there?): {}",
                path.string(), std::strerror(errno));
  struct stat st {};
  // Never more permissive than 0644, and never more than the umask let the creator have.
  const int rc = ::fstat(fd, &st) == 0 ? ::fchmod(fd, st.st_mode & kCheckpointFileMode) : -1;
  ::close(fd);
  VS_CHECK(rc == 0, "[checkpoint] cannot set the mode of {}", path.string());
}

void sync_to_disk(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  VS_CHECK(fd >= 0, "[checkpoint] cannot open {} to sync it", path.string());
  const int rc = ::fsync(fd);
  ::close(fd);
  VS_CHECK(rc == 0, "[checkpoint] syncing {} to disk failed (disk full?)", path.string());
}

void write_text_atomically(const fs::path& path, const std::string& text) {
  std::error_code ec;
  VS_USER_CHECK(!fs::is_directory(fs::symlink_status(path, ec)),
                "{} is a folder: name a file to write", path.string());
  const fs::path tmp = path.string() + ".tmp";
  remove_stale(tmp);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                        kCheckpointFileMode);
  VS_USER_CHECK(fd >= 0, "cannot create {}: {}", tmp.string(), std::strerror(errno));
  const bool ok = write_fully(fd, text) && ::fsync(fd) == 0;
  ::close(fd);
  if (ok) fs::rename(tmp, path, ec);
  if (!ok || ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);  // nothing half-written is left behind
    throw UserError(fmt::format("cannot write {}: {}", path.string(),
                                ok ? ec.message() : "the disk is full or failing"));
  }
  // A bare file name lives in the current folder.
  sync_to_disk(path.has_parent_path() ? path.parent_path() : fs::path("."));
}

void make_folder(const fs::path& path) {
  std::error_code ec;
  const auto status = fs::symlink_status(path, ec);
  VS_USER_CHECK(!fs::is_symlink(status),
                "[checkpoint] {} is a symbolic link; a checkpoint is never written through one",
                path.string());
  if (fs::is_directory(status)) return;
  if (path.has_parent_path() && !fs::exists(path.parent_path())) make_folder(path.parent_path());
  VS_USER_CHECK(::mkdir(path.c_str(), kCheckpointFolderMode) == 0 || errno == EEXIST,
                "[checkpoint] cannot create the folder {}: {}", path.string(),
                std::strerror(errno));
}

}  // namespace vescale
