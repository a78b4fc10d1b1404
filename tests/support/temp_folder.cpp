#include "support/temp_folder.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace vescale::testing {

std::string temp_folder(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

}  // namespace vescale::testing
