#include "models/decoder_variants.h"

namespace vescale::models {

const std::vector<DecoderVariant>& decoder_variants() {
  static const std::vector<DecoderVariant> variants = {
      {"llama",
       {"Llama", "LlamaDecoderLayer"},
       DecoderMlp::kSwiGLU,
       "LlamaForCausalLM",
       "llama",
       {{"attention_bias", false}, {"mlp_bias", false}},
       nlohmann::ordered_json::object()},
      {"mixtral",
       {"Mixtral", "MixtralDecoderLayer"},
       DecoderMlp::kExperts,
       "MixtralForCausalLM",
       "mixtral",
       {{"sliding_window", nullptr}},
       {{"attention_dropout", 0.0}}},
  };
  return variants;
}

}  // namespace vescale::models
