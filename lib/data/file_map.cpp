#include "data/file_map.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace vescale {

FileMap::FileMap(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  VS_USER_CHECK(fd >= 0, "data {}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw UserError(fmt::format("data {}: cannot stat: {}", path, std::strerror(err)));
  }
  bytes_ = static_cast<size_t>(st.st_size);
  void* mapped = bytes_ == 0 ? nullptr : ::mmap(nullptr, bytes_, PROT_READ, MAP_SHARED, fd, 0);
  const int err = errno;
  ::close(fd);
  VS_USER_CHECK(mapped != MAP_FAILED, "data {}: mmap of {} bytes failed: {}", path, bytes_,
                std::strerror(err));
  data_ = mapped;
}

FileMap::~FileMap() {
  if (data_ != nullptr) ::munmap(data_, bytes_);
}

}  // namespace vescale
