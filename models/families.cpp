#include "models/families.h"

#include "models/decoder_family.h"

namespace vescale {

// A new family is one line here and its own files in models/ (and its plans in plans/<name>/); a
// new decoder is a row of models/decoder_variants.cpp (NOTE [Decoder variants]).
const std::vector<std::shared_ptr<const ModelFamily>>& model_families() {
  static const std::vector<std::shared_ptr<const ModelFamily>> families = [] {
    std::vector<std::shared_ptr<const ModelFamily>> out = {models::gpt_family(),
                                                           models::mlp_family()};
    for (const models::DecoderVariant& variant : models::decoder_variants())
      out.push_back(models::decoder_family(variant));
    return out;
  }();
  return families;
}

}  // namespace vescale
