// Where a LoRA job's adapters lie in peft's files (NOTE [PEFT adapters]): our adapted Linears
// grouped by the Hugging Face module, or stacked experts' parameter, that peft adapts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/job_config.h"
#include "family/hf_layout.h"

namespace vescale::hf {

/// One of our adapted Linears inside its Hugging Face module.
struct PeftPart {
  std::string linear;      ///< ours: "model.layers.0.block_sparse_moe.experts.1.w3"
  int64_t row_offset = 0;  ///< where its output rows start among the module's
  int64_t out = 0;         ///< its output rows
  int64_t expert = 0;      ///< its expert, for a stacked parameter
  int64_t index = 0;       ///< its place among its expert's (or the module's) parts
};

/// One Hugging Face module, or one parameter stacking a layer's experts, and our Linears in it.
struct PeftModule {
  std::string name;  ///< Hugging Face's module or stacked parameter
  std::string key;   ///< its factors' prefix in peft's file, after "base_model.model."
  int64_t rows = 0;  ///< its output rows (an expert's)
  int64_t in = 0;    ///< its input columns
  int64_t experts = 1;
  bool stacked = false;  ///< a parameter of experts (peft's target_parameters)
  std::vector<PeftPart> parts;

  /// Our Linears in each expert's share (all of them for a module of its own).
  int64_t parts_per_expert() const { return static_cast<int64_t>(parts.size()) / experts; }
};

/// The modules `config`'s [lora] adapts, in the model's order of their first Linear.
std::vector<PeftModule> peft_modules(const JobConfig& config, const HFLayout& layout);

}  // namespace vescale::hf
