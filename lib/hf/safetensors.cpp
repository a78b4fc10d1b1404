#include "hf/safetensors.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <numeric>
#include <utility>

#include "core/enum_names.h"
#include "core/error.h"
#include "core/safe_files.h"
#include "core/write_fully.h"

namespace vescale::hf {
namespace {

// The format is little-endian; so is every machine this builds for (x86-64, aarch64).
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors bytes are little-endian");

/// A header may not claim more than this (the format's own readers cap it at 100 MB).
constexpr int64_t kMaxHeaderBytes = int64_t{100} << 20;

/// The dtypes by safetensors' own names ("F32", "BF16", ...), not the configs'
/// (core/dtype_names.h).
const EnumNames<at::ScalarType>& safetensors_dtype_names() {
  static const EnumNames<at::ScalarType> names("[hf] safetensors dtype", {{at::kDouble, "F64"},
                                                                          {at::kFloat, "F32"},
                                                                          {at::kHalf, "F16"},
                                                                          {at::kBFloat16, "BF16"},
                                                                          {at::kLong, "I64"},
                                                                          {at::kInt, "I32"},
                                                                          {at::kShort, "I16"},
                                                                          {at::kChar, "I8"},
                                                                          {at::kByte, "U8"},
                                                                          {at::kBool, "BOOL"}});
  return names;
}

std::string errno_text() {
  return std::strerror(errno);
}

}  // namespace

int64_t TensorEntry::bytes() const {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<int64_t>()) *
         static_cast<int64_t>(c10::elementSize(dtype));
}

std::string safetensors_dtype(at::ScalarType dtype) {
  VS_CHECK(safetensors_dtype_names().has(dtype), "[hf] safetensors has no dtype for {}",
           c10::toString(dtype));
  return safetensors_dtype_names().name(dtype);
}

SafetensorsWriter::SafetensorsWriter(std::string path, std::vector<TensorEntry> entries,
                                     const std::map<std::string, std::string>& metadata)
    : path_(std::move(path)), tmp_(path_ + ".tmp"), entries_(std::move(entries)) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  int64_t offset = 0;
  for (const TensorEntry& e : entries_) {
    const int64_t n = e.bytes();
    header[e.name] = {{"dtype", safetensors_dtype(e.dtype)},
                      {"shape", e.shape},
                      {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  remove_stale(tmp_);
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
               kCheckpointFileMode);
  VS_USER_CHECK(fd_ >= 0, "[hf] cannot create {}: {}", tmp_, errno_text());
  const uint64_t length = text.size();
  std::string prefix(reinterpret_cast<const char*>(&length), sizeof(length));
  VS_USER_CHECK(write_fully(fd_, prefix + text), "[hf] cannot write {}: {}", tmp_, errno_text());
  bytes_ = static_cast<int64_t>(prefix.size() + text.size());
}

SafetensorsWriter::~SafetensorsWriter() {
  if (fd_ < 0) return;
  ::close(fd_);
  std::error_code ignored;
  std::filesystem::remove(tmp_, ignored);  // unfinished: no file
}

void SafetensorsWriter::write(const std::string& name, const at::Tensor& values) {
  VS_CHECK(next_ < entries_.size(), "[hf] {}: more tensors than the header names", path_);
  const TensorEntry& e = entries_[next_];
  VS_CHECK(e.name == name && values.scalar_type() == e.dtype && values.sizes().vec() == e.shape,
           "[hf] {}: tensor {} is not the header's next entry {}", path_, name, e.name);
  const at::Tensor bytes = values.detach().to(at::kCPU).contiguous();
  const std::string_view view(static_cast<const char*>(bytes.data_ptr()), bytes.nbytes());
  VS_USER_CHECK(write_fully(fd_, view), "[hf] cannot write {}: {}", tmp_, errno_text());
  bytes_ += static_cast<int64_t>(bytes.nbytes());
  ++next_;
}

void SafetensorsWriter::finish() {
  VS_CHECK(next_ == entries_.size(), "[hf] {}: {} of {} tensors written", path_, next_,
           entries_.size());
  VS_USER_CHECK(::fsync(fd_) == 0, "[hf] cannot sync {}: {}", tmp_, errno_text());
  ::close(fd_);
  fd_ = -1;
  std::filesystem::rename(tmp_, path_);
}

namespace {

/// The header's JSON text of the open file `fd` of `size` bytes; `data_start` is set to where the
/// tensors' bytes begin.
std::string read_header(const std::string& path, int fd, int64_t size, int64_t& data_start) {
  uint64_t length = 0;
  VS_USER_CHECK(size >= 8 && ::pread(fd, &length, 8, 0) == 8,
                "[hf] {}: {} bytes, too short for a safetensors file (an 8-byte header length "
                "comes first)",
                path, size);
  VS_USER_CHECK(length <= static_cast<uint64_t>(std::min(size - 8, kMaxHeaderBytes)),
                "[hf] {}: the header claims {} bytes but the file holds {} after the length (a "
                "cut file, or not safetensors?)",
                path, length, size - 8);
  std::string text(length, '\0');
  VS_USER_CHECK(::pread(fd, text.data(), length, 8) == static_cast<ssize_t>(length),
                "[hf] cannot read {}: {}", path, errno_text());
  data_start = 8 + static_cast<int64_t>(length);
  return text;
}

/// One header entry, checked: a known dtype, a shape of at most 2^40 elements, and a byte range
/// [begin, end) inside the `data_bytes` after the header that holds exactly the shape's bytes.
std::pair<TensorEntry, std::pair<int64_t, int64_t>> parse_entry(const std::string& path,
                                                                const std::string& name,
                                                                const nlohmann::json& value,
                                                                int64_t data_bytes) {
  const auto bad = [&](const std::string& why) {
    return UserError(fmt::format("[hf] {}: tensor {}: {}", path, name, why));
  };
  if (!value.is_object() || !value.contains("dtype") || !value.contains("shape") ||
      !value.contains("data_offsets"))
    throw bad("needs dtype, shape and data_offsets");
  TensorEntry e{name, at::kFloat, {}};
  const auto dtype = value["dtype"].is_string() ? value["dtype"].get<std::string>() : "";
  const auto known = safetensors_dtype_names().find(dtype);
  if (!known) throw bad(fmt::format("unknown dtype '{}'", dtype));
  e.dtype = *known;
  if (!value["shape"].is_array()) throw bad("shape is not a list of dims");
  int64_t numel = 1;
  for (const auto& d : value["shape"]) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0 || d.get<int64_t>() > (int64_t{1} << 40))
      throw bad("a shape dim is not an integer in [0, 2^40]");
    e.shape.push_back(d.get<int64_t>());
    // Checked before the product: [2^40, 2^40]'s 2^80 wraps an int64 to 0 ("0 bytes").
    if (e.shape.back() != 0 && numel > (int64_t{1} << 40) / e.shape.back())
      throw bad(fmt::format("shape {} has more than 2^40 elements", value["shape"].dump()));
    numel *= e.shape.back();
  }
  const auto& offsets = value["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_integer() ||
      !offsets[1].is_number_integer())
    throw bad("data_offsets is not [begin, end]");
  const int64_t begin = offsets[0].get<int64_t>(), end = offsets[1].get<int64_t>();
  if (begin < 0 || end < begin || end > data_bytes)
    throw bad(
        fmt::format("bytes [{}, {}) lie outside the file's {} data bytes", begin, end, data_bytes));
  const int64_t expected = e.bytes();
  if (end - begin != expected)
    throw bad(fmt::format("{} bytes for a {} tensor of shape [{}] ({} bytes)", end - begin, dtype,
                          fmt::join(e.shape, ", "), expected));
  return {std::move(e), {begin, end}};
}

}  // namespace

SafetensorsFile::SafetensorsFile(std::string path) : path_(std::move(path)) {
  try {
    open_and_check();
  } catch (...) {  // no destructor runs for a constructor that throws
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    throw;
  }
}

void SafetensorsFile::open_and_check() {
  // O_NONBLOCK: a FIFO by that name opens at once (and is refused below) instead of waiting for
  // a writer; it changes nothing for a regular file.
  fd_ = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  VS_USER_CHECK(fd_ >= 0, "[hf] cannot open {}: {}", path_, errno_text());
  struct stat st {};
  VS_USER_CHECK(::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode),
                "[hf] {} is not a regular file; give the folder's safetensors file", path_);
  const std::string text = read_header(path_, fd_, st.st_size, data_start_);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(fmt::format("[hf] {}: the header is not JSON ({})", path_, e.what()));
  }
  VS_USER_CHECK(header.is_object(), "[hf] {}: the header is not a JSON object", path_);
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      for (const auto& [k, v] : value.items())
        if (v.is_string()) metadata_[k] = v.get<std::string>();
      continue;
    }
    auto [entry, range] = parse_entry(path_, name, value, st.st_size - data_start_);
    ranges_[name] = range;
    entries_[name] = std::move(entry);
  }
  check_no_overlaps();
}

void SafetensorsFile::check_no_overlaps() const {
  const std::vector<std::string> order = names();  // by first byte
  for (size_t i = 1; i < order.size(); ++i) {
    const auto& prev = ranges_.at(order[i - 1]);
    VS_USER_CHECK(prev.second <= ranges_.at(order[i]).first || prev.first == prev.second,
                  "[hf] {}: tensors {} and {} overlap", path_, order[i - 1], order[i]);
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::pair<int64_t, std::string>> starts;
  for (const auto& [name, range] : ranges_)
    starts.emplace_back(range.first, name);
  std::sort(starts.begin(), starts.end());
  std::vector<std::string> out;
  for (const auto& s : starts)
    out.push_back(s.second);
  return out;
}

const TensorEntry& SafetensorsFile::entry(const std::string& name) const {
  const auto it = entries_.find(name);
  VS_USER_CHECK(it != entries_.end(), "[hf] {}: no tensor {}", path_, name);
  return it->second;
}

at::Tensor SafetensorsFile::read(const std::string& name) const {
  const TensorEntry& e = entry(name);
  const auto [begin, end] = ranges_.at(name);
  at::Tensor out = at::empty(e.shape, at::TensorOptions().dtype(e.dtype));
  auto* into = static_cast<char*>(out.data_ptr());
  for (int64_t done = 0; done < end - begin;) {
    const ssize_t got = ::pread(fd_, into + done, static_cast<size_t>(end - begin - done),
                                data_start_ + begin + done);
    if (got < 0 && errno == EINTR) continue;
    VS_USER_CHECK(got > 0, "[hf] {}: cannot read tensor {}: {}", path_, name,
                  got == 0 ? "the file ends early" : errno_text());
    done += got;
  }
  return out;
}

}  // namespace vescale::hf
