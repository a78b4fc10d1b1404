// `vescale-train export CHECKPOINT -o DIR --format hf`: a checkpoint as a Hugging Face model
// folder (NOTE [Hugging Face layout]): config.json, and the weights as model.safetensors, or as
// model-0000k-of-0000n.safetensors with model.safetensors.index.json past the shard size. Any
// checkpoint format and layout; tensor by tensor, so memory stays bounded by the largest tensor.
#pragma once

#include <ATen/core/ScalarType.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_reader.h"
#include "config/job_config.h"
#include "family/hf_layout.h"

namespace vescale::hf {

struct ExportOptions {
  /// The weights' dtype (float32, bfloat16, float64); nullopt: the checkpoint's.
  std::optional<at::ScalarType> dtype;
  int64_t max_shard_bytes = int64_t{5} << 30;  ///< a file's weights at most (5 GiB)
  /// A LoRA checkpoint (NOTE [LoRA]): write its base's weights with the adapters merged in,
  /// W + alpha / rank · B A.
  bool merge_lora = false;
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

/// `vescale-train export CHECKPOINT -o DIR --format peft` (NOTE [PEFT adapters]): a LoRA
/// checkpoint's adapters as peft writes them, adapter_model.safetensors and adapter_config.json,
/// for the base exported with --format hf. Throws UserError for a checkpoint without adapters.
ExportReport export_peft(const CheckpointReader& reader, const std::string& folder,
                         const ExportOptions& options);

namespace detail {
/// The recorded config of the checkpoint's run: which family, which sizes.
JobConfig recorded_config(const CheckpointReader& reader);
/// Its family's Hugging Face layout; throws UserError for a family without one.
HFLayout layout_of(const CheckpointReader& reader, const JobConfig& config);
/// Makes `folder`, which must not exist or be empty (else UserError).
std::filesystem::path new_folder(const std::string& folder);
}  // namespace detail

}  // namespace vescale::hf
