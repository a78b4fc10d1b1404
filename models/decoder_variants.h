// The decoder family's variants as data (NOTE [Decoder variants]): each row is a model.name, the
// module types its model and layers take, its MLP kind and its Hugging Face class. Llama and
// Mixtral are two rows of one family (models/decoder_family.cpp), as transformers' Mixtral is a
// Llama whose MLP is a sparse mixture of experts.
//
// NOTE [Decoder variants]
// What differs between the decoders of one family is data: the MLP kind (a SwiGLU or experts,
// DecoderMlp) decides the MLP's modules, keys, parameter counts, LoRA and Muon roles and
// Hugging Face tensors; a row adds only its names and the config.json keys its Hugging Face class
// writes besides the shared ones. A variant that needs a new kind of module (biases on q, k and
// v: docs/architecture.md, "A third decoder") adds that module's option to DecoderConfig and
// DecoderAttention, and its tensors to the Hugging Face layout, beside its row.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/decoder.h"

namespace vescale::models {

struct DecoderVariant {
  std::string name;    ///< model.name: "llama"
  DecoderTypes types;  ///< {"Llama", "LlamaDecoderLayer"}
  DecoderMlp mlp;
  std::string hf_architecture;  ///< "LlamaForCausalLM"
  std::string hf_model_type;    ///< config.json's model_type: "llama"
  /// config.json's keys of this class besides the shared and the MLP kind's, with the only value
  /// our model has: written on export and checked on import ({"attention_bias", false}), or
  /// written only (a training option of theirs that ours does not have).
  nlohmann::ordered_json hf_checked, hf_written;
};

/// The rows, in the order the config reference lists their families.
const std::vector<DecoderVariant>& decoder_variants();

}  // namespace vescale::models
