#include "checkpoint/folder_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "core/safe_files.h"

namespace vescale {

void FolderLock::refuse(const std::filesystem::path& path, const LockUse& use) {
  const int err = errno;
  std::array<char, 256> owner{};
  const ssize_t n = ::pread(fd_, owner.data(), owner.size() - 1, 0);
  std::string text = n > 0 ? std::string(owner.data(), static_cast<size_t>(n)) : "";
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.pop_back();
  ::close(fd_);
  fd_ = -1;
  VS_USER_CHECK(err != EWOULDBLOCK, "{} {} is locked by {} ({}): {}", use.tag, path.string(),
                use.holder, text.empty() ? "owner unknown" : text, use.advice);
  throw UserError(fmt::format("{} cannot lock {}: {}", use.tag, path.string(), std::strerror(err)));
}

FolderLock::FolderLock(const std::filesystem::path& dir, const LockUse& use) {
  if (!std::filesystem::is_directory(dir)) make_folder(dir);  // a link to a folder is fine here
  const std::filesystem::path path = dir / use.file;
  // A lock file removed on release may go between this open and the flock: a lock on a file
  // its holder removed is no lock, so the file locked must still be the one at `path`.
  for (int attempt = 0;; ++attempt) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, kCheckpointFileMode);
    VS_USER_CHECK(fd_ >= 0, "{} cannot open the lock file {}: {}", use.tag, path.string(),
                  std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) refuse(path, use);
    struct stat locked {
    }, named{};
    if (!use.remove || (::fstat(fd_, &locked) == 0 && ::stat(path.c_str(), &named) == 0 &&
                        locked.st_dev == named.st_dev && locked.st_ino == named.st_ino))
      break;
    ::close(fd_);
    fd_ = -1;
    VS_USER_CHECK(attempt < 100, "{} cannot lock {}: it is removed as soon as it is taken", use.tag,
                  path.string());
  }
  std::array<char, 256> host{};
  ::gethostname(host.data(), host.size() - 1);
  const std::string owner = fmt::format("host {} pid {}\n", host.data(), ::getpid());
  bool ok = ::ftruncate(fd_, 0) == 0;
  ok = ok && ::pwrite(fd_, owner.data(), owner.size(), 0) == static_cast<ssize_t>(owner.size());
  VS_CHECK(ok, "{} cannot write {}", use.tag, path.string());
  if (use.remove) removed_ = path;
}

void FolderLock::release() {
  if (fd_ < 0) return;
  if (!removed_.empty()) ::unlink(removed_.c_str());  // while still held: no one locks it between
  ::close(fd_);                                       // releases the flock
  fd_ = -1;
  removed_.clear();
}

FolderLock::FolderLock(FolderLock&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), removed_(std::move(other.removed_)) {
  other.removed_.clear();
}

FolderLock& FolderLock::operator=(FolderLock&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = std::exchange(other.fd_, -1);
    removed_ = std::move(other.removed_);
    other.removed_.clear();
  }
  return *this;
}

FolderLock::~FolderLock() {
  release();
}

}  // namespace vescale
