// The decoder family (models/decoder_family.cpp) and its Hugging Face layout
// (models/decoder_hf.cpp), one family per row of models/decoder_variants.h.
#pragma once

#include <memory>

#include "family/hf_layout.h"
#include "family/model_family.h"
#include "models/decoder.h"
#include "models/decoder_variants.h"

namespace vescale::models {

/// The family of one variant: model.name = variant.name.
std::shared_ptr<const ModelFamily> decoder_family(const DecoderVariant& variant);

/// How `variant` of config `c` maps to its Hugging Face class (NOTE [Hugging Face layout]); throws
/// UserError naming spec.source for what that class cannot hold (a shared expert).
HFLayout decoder_hf_layout(const DecoderVariant& variant, const DecoderConfig& c,
                           const ModelSpec& spec);

}  // namespace vescale::models
