#include "checkpoint/checksums.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "checkpoint/crc32c.h"
#include "core/error.h"

namespace vescale {
namespace {

uint32_t tensor_crc(const at::Tensor& t) {
  return t.numel() == 0 ? 0u : crc32c(t.data_ptr(), t.nbytes());
}

/// What is wrong with the tensor read from `dataset` ("" if nothing).
std::string problem(const h5::File& file, const std::string& dataset, const at::Tensor& t,
                    bool required) {
  if (!file.has_attr(dataset, kChecksumAttr)) {
    return required ? fmt::format(
                          "[checkpoint] {}: tensor {} has no checksum ({} attribute): "
                          "the file was altered after it was written",
                          file.path(), dataset, kChecksumAttr)
                    : "";
  }
  const int64_t stored = file.attr_int(dataset, kChecksumAttr);
  const uint32_t computed = tensor_crc(t);
  if (stored == static_cast<int64_t>(computed)) return "";
  return fmt::format(
      "[checkpoint] {}: tensor {} fails its checksum (crc32c stored {:08x}, computed {:08x}): the "
      "file is corrupted; load an earlier checkpoint",
      file.path(), dataset, static_cast<uint32_t>(stored), computed);
}

}  // namespace

void write_checksummed(h5::File& file, const std::string& dataset, const at::Tensor& tensor) {
  // The bytes File::write hands HDF5 (host memory, contiguous) are the bytes checksummed.
  const at::Tensor t = tensor.detach().to(at::kCPU).contiguous();
  file.write(dataset, t);
  file.set_attr(dataset, kChecksumAttr, static_cast<int64_t>(tensor_crc(t)));
}

at::Tensor read_verified(const h5::File& file, const std::string& dataset, bool required) {
  at::Tensor t = file.read(dataset);
  const std::string wrong = problem(file, dataset, t, required);
  if (!wrong.empty()) throw UserError(wrong);
  return t;
}

std::string verify_dataset(const h5::File& file, const std::string& dataset, bool required) {
  try {
    return problem(file, dataset, file.read(dataset), required);
  } catch (const UserError& e) {
    return e.what();  // unreadable: a damaged HDF5 structure
  }
}

}  // namespace vescale
