// Fresh folders for tests that write files.
#pragma once

#include <string>

namespace vescale::testing {

/// `name` (and this process's id) under the test temp dir, emptied and created.
std::string temp_folder(const std::string& name);

}  // namespace vescale::testing
