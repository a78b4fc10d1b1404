#include "support/temp_folder.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>

namespace vescale::testing {

std::string temp_folder(const std::string& name) {
  // The process's own: ctest runs the tests of a one-by-one suite in processes side by side, and
  // each makes the suite's shared folders (LossMask's data) for itself.
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / (name + "-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

}  // namespace vescale::testing
