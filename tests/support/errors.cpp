#include "support/errors.h"

#include "core/error.h"

namespace vescale::testing {

std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace vescale::testing
