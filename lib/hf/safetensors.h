// Hugging Face's safetensors format: an 8-byte little-endian header length N, N bytes of JSON
// naming each tensor's dtype, shape and byte range in the data that follows ("data_offsets",
// relative to the end of the header; an optional "__metadata__" of strings), then the tensors'
// raw little-endian bytes, row-major. The writer streams one tensor at a time; the reader checks
// the whole header against the file before any tensor is read.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace vescale::hf {

struct TensorEntry {
  std::string name;
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> shape;

  /// Bytes of the tensor's data.
  int64_t bytes() const;
};

/// "F32", "BF16", ... for the dtypes safetensors names; throws for one it does not.
std::string safetensors_dtype(at::ScalarType dtype);

/// Writes `entries` into `path` in their order: the header is written first (so every entry is
/// known up front), then each tensor by write(). The file is written as `path`.tmp and renamed
/// by finish(), after the data is synced; a writer destroyed before finish() leaves no file.
class SafetensorsWriter {
 public:
  SafetensorsWriter(std::string path, std::vector<TensorEntry> entries,
                    const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  /// The next entry's values (its name, dtype and shape must be the entry's).
  void write(const std::string& name, const at::Tensor& values);
  /// After the last entry: sync, rename into place.
  void finish();
  /// Bytes of the file (header included).
  int64_t bytes() const { return bytes_; }

 private:
  std::string path_, tmp_;
  std::vector<TensorEntry> entries_;
  size_t next_ = 0;
  int fd_ = -1;
  int64_t bytes_ = 0;
};

/// A safetensors file opened for reading: its header parsed and checked (length, JSON, dtypes,
/// shapes, byte ranges inside the file, sizes matching shapes, no overlaps). Errors name the file
/// and the tensor.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(std::string path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  /// The tensors' names, in the header's order of their bytes.
  std::vector<std::string> names() const;
  const TensorEntry& entry(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  /// Tensor `name`, read from the file (CPU).
  at::Tensor read(const std::string& name) const;

 private:
  /// Opens path_ and checks its header (the constructor closes fd_ if it throws).
  void open_and_check();
  /// Throws unless the tensors' byte ranges are disjoint.
  void check_no_overlaps() const;

  std::string path_;
  int fd_ = -1;
  int64_t data_start_ = 0;
  std::map<std::string, TensorEntry> entries_;
  std::map<std::string, std::pair<int64_t, int64_t>> ranges_;  ///< [begin, end) in the data
  std::map<std::string, std::string> metadata_;
};

}  // namespace vescale::hf
