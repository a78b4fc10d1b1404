// The lock that keeps two jobs from writing one dump folder (NOTE [One run per dump folder] in
// train/run_folder.h).
#pragma once

#include <filesystem>
#include <string>

namespace vescale {

/// Who takes a folder's lock, for the file's name and the refusal's words.
struct LockUse {
  std::string file = "LOCK";
  std::string tag = "[job]";  ///< starts the message
  std::string holder = "another job";
  std::string advice =
      "two jobs must not write one dump folder. Wait for it to end, or give this job another "
      "job.dump_folder";
  /// Remove the lock file when the lock is let go (a folder the lock must leave as it was).
  bool remove = false;
};

/// An exclusive flock(2) on <dir>/LOCK (use.file), which holds "host <name> pid <pid>" of the
/// owner. The kernel drops the lock when its process dies, so a lock file left by a crash is no
/// obstacle.
class FolderLock {
 public:
  FolderLock() = default;
  /// Takes the lock, or throws UserError naming the host and pid of the process holding it.
  explicit FolderLock(const std::filesystem::path& dir, const LockUse& use = LockUse{});
  FolderLock(FolderLock&& other) noexcept;
  FolderLock& operator=(FolderLock&& other) noexcept;
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;
  ~FolderLock();

  bool held() const { return fd_ >= 0; }

 private:
  /// Closes the lock file and throws UserError: held by another process (named from the file),
  /// or flock's errno.
  [[noreturn]] void refuse(const std::filesystem::path& path, const LockUse& use);
  void release();

  int fd_ = -1;
  std::filesystem::path removed_;  ///< the lock file, removed on release; empty: kept
};

}  // namespace vescale
