// A LoRA job's base (NOTE [LoRA]): the weights it adapts and keeps frozen, named in its
// checkpoints by where they came from and a checksum of their files, so that a resumed run, an
// evaluation or an export finds the same weights or says that they changed.
#pragma once

#include <string>

namespace vescale {

struct LoraBase {
  std::string source;    ///< a checkpoint's path made absolute, or "hf:DIR" with DIR absolute
  std::string checksum;  ///< CRC-32C of its files, 8 hex digits
};

/// checkpoint.load's `source` as a LoRA checkpoint records it, with the checksum of its files
/// now: a step folder's .h5 files, a merged .h5, or a Hugging Face folder's config.json and
/// .safetensors files, in name order. Throws UserError naming `source` when it holds none.
LoraBase lora_base_of(const std::string& source);

/// The base a LoRA checkpoint records, checked: its files must be there with the checksum they
/// had when the run started, else a UserError naming `checkpoint`, the base and both checksums.
void check_lora_base(const LoraBase& recorded, const std::string& checkpoint);

}  // namespace vescale
