// A whole file memory-mapped read-only and shared (MAP_SHARED), so the ranks of one machine that
// map the same file share its pages in the page cache instead of each holding a copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace vescale {

class FileMap {
 public:
  /// Maps `path`; a UserError names it if it cannot be opened or mapped. An empty file maps to
  /// no bytes.
  explicit FileMap(const std::string& path);
  ~FileMap();
  FileMap(const FileMap&) = delete;
  FileMap& operator=(const FileMap&) = delete;

  const uint8_t* data() const { return static_cast<const uint8_t*>(data_); }
  size_t bytes() const { return bytes_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace vescale
