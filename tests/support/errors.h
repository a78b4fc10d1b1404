// What a call throws, for the tests of what a user reads.
#pragma once

#include <functional>
#include <string>

namespace vescale::testing {

/// The message of the vescale::Error (a UserError among them) that `call` throws, or "" when it
/// throws none.
std::string error_of(const std::function<void()>& call);

}  // namespace vescale::testing
