#include "checkpoint/h5.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <mutex>

#include "core/error.h"
#include "core/input_file.h"
#include "core/safe_files.h"
#include "core/version_guards.h"

namespace vescale::h5 {
namespace {

/// HDF5 prints its error stack unless told not to, and a thread-safe build keeps that setting
/// per thread: each thread that opens a file says it once. Errors are reported by our checks.
///
/// And HDF5's exit handler is never installed: it closes the files still open at exit, and a file
/// whose close failed (a full disk) stays in its table and crashes that handler (exit 139 after a
/// clean error). Every file here is closed, and checked, before exit (File::close).
void quiet_hdf5() {
  static const bool no_atexit = [] { return H5dont_atexit() >= 0; }();
  (void)no_atexit;
  thread_local bool quiet = false;
  if (!quiet) H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  quiet = true;
}

hid_t native_type(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return H5T_NATIVE_FLOAT;
    case at::kDouble:
      return H5T_NATIVE_DOUBLE;
    case at::kLong:
      return H5T_NATIVE_INT64;
    case at::kInt:
      return H5T_NATIVE_INT32;  // read only (to report it): vescale-train never writes int32
    default:
      throw Error(fmt::format("[checkpoint] cannot store {} tensors", c10::toString(t)));
  }
}

/// The element type of a dataset as it is stored: HDF5 would convert an int32 or float16 dataset
/// to whatever is asked for, so a dataset's own type is checked, never assumed.
std::optional<at::ScalarType> scalar_type(hid_t type) {
  const size_t size = H5Tget_size(type);
  switch (H5Tget_class(type)) {
    case H5T_INTEGER:
      if (H5Tget_sign(type) != H5T_SGN_2) return std::nullopt;
      if (size == 8) return at::kLong;
      if (size == 4) return at::kInt;
      return std::nullopt;
    case H5T_FLOAT:
      if (size == 8) return at::kDouble;
      if (size == 4) return at::kFloat;
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

Handle link_props() {
  Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  return lcpl;
}

}  // namespace

Handle& Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    if (id_ >= 0 && close_) close_(id_);
    id_ = other.id_;
    close_ = other.close_;
    other.id_ = -1;
  }
  return *this;
}

Handle::~Handle() {
  if (id_ >= 0 && close_) close_(id_);
}

void File::close() {
  if (!handle_.valid()) return;
  errno = 0;
  const bool flushed = H5Fflush(id(), H5F_SCOPE_LOCAL) >= 0;
  const int flush_errno = errno;
  const bool closed = H5Fclose(handle_.release()) >= 0;
  VS_CHECK(flushed && closed, "[checkpoint] writing {} failed ({}): is the disk full?", path_,
           flush_errno != 0 ? std::strerror(flush_errno) : "HDF5 could not flush it");
}

File File::create(const std::string& path) {
  quiet_hdf5();
  // H5F_ACC_EXCL opens with O_CREAT | O_EXCL, which fails on anything at `path`, a symbolic link
  // included: a link planted at a temporary's name is never written through.
  Handle h(H5Fcreate(path.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
  VS_USER_CHECK(h.valid(),
                "[checkpoint] cannot create {} (it exists, or its folder is not writable)", path);
  set_file_mode(path);
  return File(path, std::move(h));
}

File File::open(const std::string& path) {
  quiet_hdf5();
  VS_USER_CHECK(std::filesystem::exists(path),
                "[checkpoint] {} is not a readable HDF5 file (missing, truncated or corrupted)",
                path);
  require_regular_file(path, "[checkpoint] file");  // a FIFO would block H5Fis_hdf5's open
  VS_USER_CHECK(H5Fis_hdf5(path.c_str()) > 0,
                "[checkpoint] {} is not a readable HDF5 file (missing, truncated or corrupted)",
                path);
  Handle h(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  VS_USER_CHECK(h.valid(), "[checkpoint] {} is not a readable HDF5 file (truncated or corrupted)",
                path);
  return File(path, std::move(h));
}

File File::open_for_append(const std::string& path) {
  quiet_hdf5();
  Handle h(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
  VS_USER_CHECK(h.valid(), "[checkpoint] cannot open {} to add to it", path);
  return File(path, std::move(h));
}

Handle File::open_object(const std::string& name) const {
  Handle o(H5Oopen(id(), name.c_str(), H5P_DEFAULT), H5Oclose);
  VS_USER_CHECK(o.valid(), "[checkpoint] {}: no object '{}'", path_, name);
  return o;
}

void File::write(const std::string& name, const at::Tensor& tensor) {
  const at::Tensor t = tensor.detach().to(at::kCPU).contiguous();  // HDF5 reads host memory
  std::vector<hsize_t> dims(t.sizes().begin(), t.sizes().end());
  Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
  const Handle lcpl = link_props();
  const hid_t type = native_type(t.scalar_type());
  Handle ds(H5Dcreate2(id(), name.c_str(), type, space.get(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT),
            H5Dclose);
  VS_CHECK(ds.valid(), "[checkpoint] {}: cannot create dataset {}", path_, name);
  if (t.numel() > 0) {
    VS_CHECK(H5Dwrite(ds.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data_ptr()) >= 0,
             "[checkpoint] {}: writing {} failed (disk full?)", path_, name);
  }
}

std::vector<int64_t> File::shape(const std::string& name) const {
  Handle ds(H5Dopen2(id(), name.c_str(), H5P_DEFAULT), H5Dclose);
  VS_USER_CHECK(ds.valid(), "[checkpoint] {}: no tensor '{}'", path_, name);
  Handle space(H5Dget_space(ds.get()), H5Sclose);
  const int ndim = H5Sget_simple_extent_ndims(space.get());
  std::vector<hsize_t> dims(static_cast<size_t>(std::max(ndim, 0)));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return std::vector<int64_t>(dims.begin(), dims.end());
}

at::ScalarType File::dtype(const std::string& name) const {
  Handle ds(H5Dopen2(id(), name.c_str(), H5P_DEFAULT), H5Dclose);
  VS_USER_CHECK(ds.valid(), "[checkpoint] {}: no tensor '{}'", path_, name);
  Handle type(H5Dget_type(ds.get()), H5Tclose);
  const auto t = scalar_type(type.get());
  VS_USER_CHECK(t.has_value(),
                "[checkpoint] {}: tensor '{}' has an element type vescale-train never writes (HDF5 "
                "class {}, {} bytes); expected float32, float64 or int64",
                path_, name, static_cast<int>(H5Tget_class(type.get())), H5Tget_size(type.get()));
  return *t;
}

at::Tensor File::read(const std::string& name) const {
  const auto dims = shape(name);
  return read_box(name, std::vector<int64_t>(dims.size(), 0), dims);
}

at::Tensor File::read_box(const std::string& name, const std::vector<int64_t>& offsets,
                          const std::vector<int64_t>& sizes) const {
  Handle ds(H5Dopen2(id(), name.c_str(), H5P_DEFAULT), H5Dclose);
  VS_USER_CHECK(ds.valid(), "[checkpoint] {}: no tensor '{}'", path_, name);
  const auto dims = shape(name);
  VS_USER_CHECK(offsets.size() == dims.size() && sizes.size() == dims.size(),
                "[checkpoint] {}: tensor '{}' has {} dims, not {}", path_, name, dims.size(),
                sizes.size());
  for (size_t d = 0; d < dims.size(); ++d) {
    VS_USER_CHECK(offsets[d] >= 0 && sizes[d] >= 0 && offsets[d] + sizes[d] <= dims[d],
                  "[checkpoint] {}: box [{}, +{}) of dim {} is outside tensor '{}' ({} long)",
                  path_, offsets[d], sizes[d], d, name, dims[d]);
  }
  at::Tensor out = at::empty(sizes, dtype(name));
  if (out.numel() == 0) return out;
  Handle file_space(H5Dget_space(ds.get()), H5Sclose);
  std::vector<hsize_t> start(offsets.begin(), offsets.end()), count(sizes.begin(), sizes.end());
  if (!start.empty()) {
    H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(),
                        nullptr);
  }
  Handle mem_space(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr),
                   H5Sclose);
  VS_USER_CHECK(H5Dread(ds.get(), native_type(out.scalar_type()), mem_space.get(), file_space.get(),
                        H5P_DEFAULT, out.data_ptr()) >= 0,
                "[checkpoint] {}: reading '{}' failed (truncated or corrupted file?)", path_, name);
  return out;
}

bool File::exists(const std::string& name) const {
  // Check each prefix: H5Lexists fails on a missing intermediate group.
  size_t pos = 0;
  while ((pos = name.find('/', pos + 1)) != std::string::npos) {
    if (H5Lexists(id(), name.substr(0, pos).c_str(), H5P_DEFAULT) <= 0) return false;
  }
  return H5Lexists(id(), name.c_str(), H5P_DEFAULT) > 0;
}

namespace {

/// H5Ovisit's callback: appends the name of each dataset to the vector `names` points to.
template <typename Info>
herr_t collect_dataset(hid_t, const char* name, const Info* info, void* names) {
  if (info->type == H5O_TYPE_DATASET)
    static_cast<std::vector<std::string>*>(names)->push_back(name);
  return 0;
}

}  // namespace

std::vector<std::string> File::datasets(const std::string& group) const {
  std::vector<std::string> names;
  if (!exists(group)) return names;
  // Objects, not links: a dataset hard-linked under two names (a deduped checkpoint) is listed
  // once. Only the object's type is asked for.
  Handle g(H5Gopen2(id(), group.c_str(), H5P_DEFAULT), H5Gclose);
  const auto visit = [&] {
#if VESCALE_HDF5_HAS_OVISIT3
    return H5Ovisit3(g.get(), H5_INDEX_NAME, H5_ITER_INC, &collect_dataset<H5O_info2_t>, &names,
                     H5O_INFO_BASIC);
#else
    return H5Ovisit(g.get(), H5_INDEX_NAME, H5_ITER_INC, &collect_dataset<H5O_info_t>, &names);
#endif
  };
  VS_USER_CHECK(g.valid() && visit() >= 0,
                "[checkpoint] {}: cannot list the tensors of {}: the file is damaged", path_,
                group);
  return names;
}

void File::hard_link(const std::string& target, const std::string& alias) {
  const Handle lcpl = link_props();
  VS_CHECK(H5Lcreate_hard(id(), target.c_str(), id(), alias.c_str(), lcpl.get(), H5P_DEFAULT) >= 0,
           "[checkpoint] {}: cannot link {} to {}", path_, alias, target);
}

void File::make_group(const std::string& name) {
  if (exists(name)) return;
  const Handle lcpl = link_props();
  Handle g(H5Gcreate2(id(), name.c_str(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  VS_CHECK(g.valid(), "[checkpoint] {}: cannot create group {}", path_, name);
}

void File::set_attr(const std::string& object, const std::string& key, const std::string& value) {
  Handle o = open_object(object);
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), std::max<size_t>(1, value.size()));
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle a(H5Acreate2(o.get(), key.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
           H5Aclose);
  const std::string padded = value.empty() ? std::string(1, '\0') : value;
  VS_CHECK(a.valid() && H5Awrite(a.get(), type.get(), padded.data()) >= 0,
           "[checkpoint] {}: cannot write attribute {} of {}", path_, key, object);
}

void File::set_attr(const std::string& object, const std::string& key,
                    const std::vector<int64_t>& value) {
  Handle o = open_object(object);
  const hsize_t n = value.size();
  Handle space(n == 0 ? H5Screate(H5S_NULL) : H5Screate_simple(1, &n, nullptr), H5Sclose);
  Handle a(
      H5Acreate2(o.get(), key.c_str(), H5T_NATIVE_INT64, space.get(), H5P_DEFAULT, H5P_DEFAULT),
      H5Aclose);
  VS_CHECK(a.valid() && (n == 0 || H5Awrite(a.get(), H5T_NATIVE_INT64, value.data()) >= 0),
           "[checkpoint] {}: cannot write attribute {} of {}", path_, key, object);
}

void File::set_attr(const std::string& object, const std::string& key, int64_t value) {
  Handle o = open_object(object);
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle a(
      H5Acreate2(o.get(), key.c_str(), H5T_NATIVE_INT64, space.get(), H5P_DEFAULT, H5P_DEFAULT),
      H5Aclose);
  VS_CHECK(a.valid() && H5Awrite(a.get(), H5T_NATIVE_INT64, &value) >= 0,
           "[checkpoint] {}: cannot write attribute {} of {}", path_, key, object);
}

bool File::has_attr(const std::string& object, const std::string& key) const {
  if (!exists(object)) return false;
  return H5Aexists_by_name(id(), object.c_str(), key.c_str(), H5P_DEFAULT) > 0;
}

std::string File::attr_string(const std::string& object, const std::string& key) const {
  VS_USER_CHECK(has_attr(object, key), "[checkpoint] {}: {} has no attribute '{}'", path_, object,
                key);
  Handle a(H5Aopen_by_name(id(), object.c_str(), key.c_str(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  Handle type(H5Aget_type(a.get()), H5Tclose);
  std::string out(H5Tget_size(type.get()), '\0');
  H5Aread(a.get(), type.get(), out.data());
  out.resize(std::strlen(out.c_str()));
  return out;
}

std::vector<int64_t> File::attr_ints(const std::string& object, const std::string& key) const {
  VS_USER_CHECK(has_attr(object, key), "[checkpoint] {}: {} has no attribute '{}'", path_, object,
                key);
  Handle a(H5Aopen_by_name(id(), object.c_str(), key.c_str(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  Handle space(H5Aget_space(a.get()), H5Sclose);
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  std::vector<int64_t> out(static_cast<size_t>(std::max<hssize_t>(n, 0)));
  if (!out.empty()) H5Aread(a.get(), H5T_NATIVE_INT64, out.data());
  return out;
}

int64_t File::attr_int(const std::string& object, const std::string& key) const {
  const auto v = attr_ints(object, key);
  VS_USER_CHECK(v.size() == 1, "[checkpoint] {}: attribute {} of {} is not a number", path_, key,
                object);
  return v[0];
}

}  // namespace vescale::h5
