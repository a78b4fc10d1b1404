#include "core/dtype_names.h"

namespace vescale {

const EnumNames<c10::ScalarType>& dtype_names() {
  static const EnumNames<c10::ScalarType> names("dtype", {{c10::kFloat, "float32"},
                                                          {c10::kBFloat16, "bfloat16"},
                                                          {c10::kDouble, "float64"},
                                                          {c10::kHalf, "float16"}});
  return names;
}

}  // namespace vescale
