// `vescale-train export CHECKPOINT -o DIR --format hf`: a checkpoint as a Hugging Face model
// folder (NOTE [Hugging Face layout]): config.json, and the weights as model.safetensors, or as
// model-0000k-of-0000n.safetensors with model.safetensors.index.json past the shard size. Any
// checkpoint format and layout; tensor by tensor, so memory stays bounded by the largest tensor.
#pragma once

#include <ATen/core/ScalarType.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_reader.h"

namespace vescale::hf {

struct ExportOptions {
  /// The weights' dtype (float32, bfloat16, float64); nullopt: the checkpoint's.
  std::optional<at::ScalarType> dtype;
  int64_t max_shard_bytes = int64_t{5} << 30;  ///< a file's weights at most (5 GiB)
};

struct ExportReport {
  std::string architecture;
  std::vector<std::string> files;  ///< written, config.json and the index included
  int64_t tensors = 0;
  int64_t weight_files = 0;  ///< safetensors files
  int64_t bytes = 0;         ///< of the safetensors files
  double seconds = 0;
};

/// Writes the Hugging Face folder of the model `reader`'s checkpoint was trained with (its
/// recorded config says which) into `folder`, which must not exist or be empty. Throws
/// UserError for a family without a Hugging Face counterpart.
ExportReport export_hf(const CheckpointReader& reader, const std::string& folder,
                       const ExportOptions& options);

}  // namespace vescale::hf
