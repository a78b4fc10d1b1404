// Merging a checkpoint into one file of full tensors (the merged format), from any checkpoint.
#pragma once

#include <cstdint>
#include <string>

#include "checkpoint/checkpoint_reader.h"

namespace vescale {

/// Writes a merged file from any checkpoint (model and optimizer state, or the model only).
/// Returns the number of tensors written.
int64_t merge_checkpoint(const CheckpointReader& reader, const std::string& output,
                         bool model_only);

}  // namespace vescale
