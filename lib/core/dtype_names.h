// The floating dtypes by the names configs, flags, checkpoints and Hugging Face's config.json use
// ("float32", "bfloat16", "float64", "float16"): one table for every place that names a dtype.
#pragma once

#include <c10/core/ScalarType.h>

#include "core/enum_names.h"

namespace vescale {

const EnumNames<c10::ScalarType>& dtype_names();

}  // namespace vescale
