// Per-dataset checksums of checkpoint files (NOTE [Checkpoint integrity]): each tensor's dataset
// carries the CRC-32C of its bytes as written, checked whenever the dataset is read.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>

#include "checkpoint/h5.h"

namespace vescale {

/// The dataset attribute holding the CRC-32C (as an int64) of the dataset's raw bytes.
constexpr const char* kChecksumAttr = "crc32c";

/// Writes `tensor` at `dataset` with its checksum attribute.
void write_checksummed(h5::File& file, const std::string& dataset, const at::Tensor& tensor);

/// Reads the whole dataset and checks its bytes against the stored checksum: a mismatch is a
/// UserError naming the file and the tensor. A dataset without a checksum (a format version 1
/// file) is returned unchecked when `required` is false, and refused when it is true.
at::Tensor read_verified(const h5::File& file, const std::string& dataset, bool required);

/// read_verified() for reporting: empty if the dataset is intact, else what is wrong with it.
std::string verify_dataset(const h5::File& file, const std::string& dataset, bool required);

}  // namespace vescale
