// A small RAII layer over the HDF5 C API: files, datasets with attributes, hyperslab reads, hard
// links. Errors become UserError naming the file (a truncated or corrupted file is a user problem).
#pragma once

#include <ATen/core/Tensor.h>
#include <hdf5.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace vescale::h5 {

/// An owned HDF5 identifier, closed with the matching H5*close.
class Handle {
 public:
  Handle() = default;
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  Handle(Handle&& other) noexcept : id_(other.id_), close_(other.close_) { other.id_ = -1; }
  Handle& operator=(Handle&& other) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle();
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  /// Gives up ownership: the caller closes the id.
  hid_t release() {
    const hid_t id = id_;
    id_ = -1;
    return id;
  }

 private:
  hid_t id_ = -1;
  herr_t (*close_)(hid_t) = nullptr;
};

class File {
 public:
  /// Creates a new file for writing (mode at most 0644); fails if anything, a symbolic link
  /// included, is at `path`.
  static File create(const std::string& path);
  /// Opens an existing file read-only; a file that is not HDF5 or is damaged is a UserError.
  static File open(const std::string& path);
  /// Opens an existing file to add to it.
  static File open_for_append(const std::string& path);

  const std::string& path() const { return path_; }
  hid_t id() const { return handle_.get(); }

  /// Flushes and closes a file written to, throwing if HDF5 could not write all of it (a full
  /// disk, a file size limit): HDF5 buffers writes, so a write can fail only here, and a closing
  /// destructor could only ignore it.
  void close();

  /// Writes a tensor (float32, float64 or int64) at `name` ("/model/x.weight"), creating groups.
  void write(const std::string& name, const at::Tensor& tensor);
  /// Reads the whole dataset, or the box [offsets, offsets + sizes) of it.
  at::Tensor read(const std::string& name) const;
  at::Tensor read_box(const std::string& name, const std::vector<int64_t>& offsets,
                      const std::vector<int64_t>& sizes) const;
  std::vector<int64_t> shape(const std::string& name) const;
  /// The dataset's own element type: float32, float64, int64 or int32; any other is a UserError.
  at::ScalarType dtype(const std::string& name) const;
  bool exists(const std::string& name) const;
  /// Dataset paths under `group` ("/model"), relative to it, in name order.
  std::vector<std::string> datasets(const std::string& group) const;
  /// Makes `alias` another name of the dataset `target` (an HDF5 hard link).
  void hard_link(const std::string& target, const std::string& alias);

  void set_attr(const std::string& object, const std::string& key, const std::string& value);
  void set_attr(const std::string& object, const std::string& key,
                const std::vector<int64_t>& value);
  void set_attr(const std::string& object, const std::string& key, int64_t value);
  std::string attr_string(const std::string& object, const std::string& key) const;
  std::vector<int64_t> attr_ints(const std::string& object, const std::string& key) const;
  int64_t attr_int(const std::string& object, const std::string& key) const;
  bool has_attr(const std::string& object, const std::string& key) const;
  /// Creates an (empty) group, with intermediate groups.
  void make_group(const std::string& name);

 private:
  File(std::string path, Handle handle) : path_(std::move(path)), handle_(std::move(handle)) {}
  Handle open_object(const std::string& name) const;
  std::string path_;
  Handle handle_;
};

}  // namespace vescale::h5
