// The test binary's main: gtest's own, ended as vescale-train ends (NOTE [Quick exit]), since
// ctest starts it once per suite or slow test and LibTorch's exit is a sixth of a short start.
#include <gtest/gtest.h>

#include "core/quick_exit.h"

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  vescale::exit_flushed(RUN_ALL_TESTS());
}
