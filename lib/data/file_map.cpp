#include "data/file_map.h"

#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "core/error.h"
#include "core/input_file.h"

namespace vescale {
namespace {

/// The read() in progress on this thread, where a SIGBUS jumps back to.
thread_local sigjmp_buf* t_bus_return = nullptr;

void on_sigbus(int sig, siginfo_t*, void*) {
  if (t_bus_return != nullptr) siglongjmp(*t_bus_return, 1);
  ::signal(sig, SIG_DFL);  // not a guarded read: the default action, as if never caught
  ::raise(sig);
}

void install_sigbus_guard() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = on_sigbus;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    ::sigaction(SIGBUS, &action, nullptr);
  });
}

[[noreturn]] void throw_changed(const std::string& path, const std::string& how) {
  throw UserError(fmt::format(
      "data {}: {} while the job ran; a running job's data must stay as it was (the committed "
      "checkpoints are kept: restore the file and resume with --checkpoint.load=latest)",
      path, how));
}

}  // namespace

FileMap::FileMap(const std::string& path) : path_(path) {
  require_regular_file(path, "data");
  // O_NONBLOCK: should the path have become a FIFO since, the open does not wait for a writer.
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  VS_USER_CHECK(fd_ >= 0, "data {}: cannot open: {}", path, std::strerror(errno));
  if (::fstat(fd_, &mapped_) != 0 || !S_ISREG(mapped_.st_mode)) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    throw UserError(fmt::format("data {}: not a regular file, or cannot stat it ({})", path,
                                std::strerror(err)));
  }
  bytes_ = static_cast<size_t>(mapped_.st_size);
  void* mapped = bytes_ == 0 ? nullptr : ::mmap(nullptr, bytes_, PROT_READ, MAP_SHARED, fd_, 0);
  VS_USER_CHECK(mapped != MAP_FAILED, "data {}: mmap of {} bytes failed: {}", path, bytes_,
                std::strerror(errno));
  data_ = mapped;
  install_sigbus_guard();
}

FileMap::~FileMap() {
  if (data_ != nullptr) ::munmap(data_, bytes_);
  if (fd_ >= 0) ::close(fd_);
}

void FileMap::check_unchanged() const {
  struct stat now {};
  VS_USER_CHECK(::fstat(fd_, &now) == 0, "data {}: cannot stat: {}", path_, std::strerror(errno));
  if (now.st_size != mapped_.st_size) {
    throw_changed(
        path_, fmt::format("its size changed from {} to {} bytes", mapped_.st_size, now.st_size));
  }
  if (now.st_mtim.tv_sec != mapped_.st_mtim.tv_sec ||
      now.st_mtim.tv_nsec != mapped_.st_mtim.tv_nsec) {
    throw_changed(path_, "it was modified");
  }
}

void FileMap::read(const std::function<void()>& body) const {
  check_unchanged();
  sigjmp_buf here;
  sigjmp_buf* const outer = t_bus_return;
  if (sigsetjmp(here, 1) != 0) {
    t_bus_return = outer;
    throw_changed(path_, "reading it failed (SIGBUS: it shrank)");
  }
  t_bus_return = &here;
  try {
    body();
  } catch (...) {
    t_bus_return = outer;
    throw;
  }
  t_bus_return = outer;
}

}  // namespace vescale
