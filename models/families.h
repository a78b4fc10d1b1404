// The built-in model families; models/families.cpp lists them for model_families().
#pragma once

#include <memory>

#include "family/model_family.h"

namespace vescale::models {

std::shared_ptr<const ModelFamily> gpt_family();
std::shared_ptr<const ModelFamily> mlp_family();

}  // namespace vescale::models
