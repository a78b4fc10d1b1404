// The lock that keeps two jobs from writing one dump folder (NOTE [One run per dump folder] in
// train/run_folder.h).
#pragma once

#include <filesystem>
#include <string>

namespace vescale {

/// An exclusive flock(2) on <dir>/LOCK, which holds "host <name> pid <pid>" of the owner. The
/// kernel drops the lock when its process dies, so a LOCK file left by a crash is no obstacle.
class FolderLock {
 public:
  FolderLock() = default;
  /// Takes the lock, or throws UserError naming the host and pid of the job holding it.
  explicit FolderLock(const std::filesystem::path& dir);
  FolderLock(FolderLock&& other) noexcept;
  FolderLock& operator=(FolderLock&& other) noexcept;
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;
  ~FolderLock();

  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

}  // namespace vescale
