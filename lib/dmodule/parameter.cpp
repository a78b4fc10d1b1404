#include "dmodule/parameter.h"

#include <ATen/ATen.h>

#include "core/error.h"

namespace vescale {

at::Tensor ParamInit::make(const RngKey& key, const DTensorSpec& spec, at::ScalarType dtype) const {
  const Box box = Box::local(spec);
  const Device device = spec.mesh.device();
  switch (kind) {
    case Kind::kNormal:
      return vescale::normal(key, box, 0.0, std, dtype, device);
    case Kind::kZeros:
      return at::zeros(box.sizes, at::dtype(dtype).device(device));
    case Kind::kOnes:
      return at::ones(box.sizes, at::dtype(dtype).device(device));
    case Kind::kUniform:
      return vescale::uniform(key, box, -bound, bound, dtype, device);
  }
  return {};
}

DTensor& Parameter::get() {
  VS_CHECK(value.has_value(), "[dmodule] parameter is not materialised yet");
  return *value;
}

const DTensor& Parameter::get() const {
  VS_CHECK(value.has_value(), "[dmodule] parameter is not materialised yet");
  return *value;
}

}  // namespace vescale
