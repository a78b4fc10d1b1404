#include "checkpoint/folder_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "core/safe_files.h"

namespace vescale {

FolderLock::FolderLock(const std::filesystem::path& dir) {
  if (!std::filesystem::is_directory(dir)) make_folder(dir);  // a link to a folder is fine here
  const std::filesystem::path path = dir / "LOCK";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, kCheckpointFileMode);
  VS_USER_CHECK(fd_ >= 0, "[job] cannot open the lock file {}: {}", path.string(),
                std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    std::array<char, 256> owner{};
    const ssize_t n = ::pread(fd_, owner.data(), owner.size() - 1, 0);
    std::string text = n > 0 ? std::string(owner.data(), static_cast<size_t>(n)) : "";
    while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
      text.pop_back();
    ::close(fd_);
    fd_ = -1;
    VS_USER_CHECK(err != EWOULDBLOCK,
                  "[job] {} is locked by another job ({}): two jobs must not write one dump "
                  "folder. Wait for it to end, or give this job another job.dump_folder",
                  path.string(), text.empty() ? "owner unknown" : text);
    throw UserError(fmt::format("[job] cannot lock {}: {}", path.string(), std::strerror(err)));
  }
  std::array<char, 256> host{};
  ::gethostname(host.data(), host.size() - 1);
  const std::string owner = fmt::format("host {} pid {}\n", host.data(), ::getpid());
  bool ok = ::ftruncate(fd_, 0) == 0;
  ok = ok && ::pwrite(fd_, owner.data(), owner.size(), 0) == static_cast<ssize_t>(owner.size());
  VS_CHECK(ok, "[job] cannot write {}", path.string());
}

FolderLock::FolderLock(FolderLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

FolderLock& FolderLock::operator=(FolderLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

FolderLock::~FolderLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

}  // namespace vescale
