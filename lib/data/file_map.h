// A whole file memory-mapped read-only and shared (MAP_SHARED), so the ranks of one machine that
// map the same file share its pages in the page cache instead of each holding a copy.
//
// NOTE [Data that changes under a job]
// A mapped file that another program truncates makes the next read past its new end a SIGBUS,
// which would kill the rank (exit 135) with no word of why; a file rewritten in place feeds the
// job other data than its checkpoints assume. So the file is kept open, and every read() first
// compares the file's size and modification time with those it had when mapped, and runs under
// a SIGBUS guard on its thread (for a truncation between the check and the read): either ends in
// a UserError naming the file, so the job fails cleanly and its committed checkpoints stay. A
// file replaced by rename is not this file: the job reads the one it opened, unchanged.
#pragma once

#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace vescale {

class FileMap {
 public:
  /// Maps `path`; a UserError names it if it is not a regular file (a FIFO, device or folder
  /// would block or never end) or cannot be opened or mapped. An empty file maps to no bytes.
  explicit FileMap(const std::string& path);
  ~FileMap();
  FileMap(const FileMap&) = delete;
  FileMap& operator=(const FileMap&) = delete;

  /// Runs `body`, which reads data(), after checking that the file is as it was mapped, with
  /// a SIGBUS there turned into a UserError (NOTE [Data that changes under a job]). `body` must
  /// hold no object that needs destroying while it reads (a SIGBUS leaves it by siglongjmp).
  void read(const std::function<void()>& body) const;

  const uint8_t* data() const { return static_cast<const uint8_t*>(data_); }
  size_t bytes() const { return bytes_; }
  const std::string& path() const { return path_; }

 private:
  /// Throws unless the open file's size and modification time are those it was mapped with.
  void check_unchanged() const;

  std::string path_;
  int fd_ = -1;
  struct stat mapped_ {};
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace vescale
