#include "models/families.h"

namespace vescale {

// A new family is one line here and its own files in models/ (and its plans in plans/<name>/).
const std::vector<std::shared_ptr<const ModelFamily>>& model_families() {
  static const std::vector<std::shared_ptr<const ModelFamily>> families = {
      models::gpt_family(),
      models::mlp_family(),
      models::llama_family(),
      models::mixtral_family(),
  };
  return families;
}

}  // namespace vescale
