// Step folders in step order (numbers, not strings) for `latest` and pruning, pruning's
// COMMIT-first deletion, and the CRC-32C the datasets carry (NOTE [Checkpoint integrity]).
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "checkpoint/crc32c.h"
#include "checkpoint/step_folders.h"

namespace vescale {
namespace {

namespace fs = std::filesystem;

TEST(StepFolders, OrderedByNumberPastSixDigits) {
  const fs::path dir =
      fs::temp_directory_path() / fs::path("vescale-steps-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  for (const std::string name :
       {"step-000002", "step-999999", "step-1000000", "step-000010", "step-12x", "other"}) {
    fs::create_directories(dir / name);
    if (name != "step-000010") std::ofstream(dir / name / "COMMIT") << "step\n";
  }
  std::string order;
  for (const auto& s : committed_step_folders(dir))
    order += s.path.filename().string() + " ";
  std::printf("committed, oldest first: %s\n", order.c_str());
  EXPECT_EQ(order, "step-000002 step-999999 step-1000000 ");
  EXPECT_EQ(list_step_folders(dir).size(), 4u);  // step-000010 without COMMIT too
  EXPECT_EQ(parse_step_folder("step-1000000"), 1000000);
  EXPECT_FALSE(parse_step_folder("step-"));
  EXPECT_FALSE(parse_step_folder("step-99999999999999999999"));
  EXPECT_EQ(step_folder_name(1000000), "step-1000000");

  remove_step_folder(dir / "step-000002");
  EXPECT_FALSE(fs::exists(dir / "step-000002"));
  fs::remove_all(dir);
}

TEST(StepFolders, AKillWhileDeletingNeverLeavesACommittedStepMissingAFile) {
  // Pruning killed at random moments (a child process deleting, SIGKILLed after a few hundred
  // microseconds): whenever a rank file is gone, so is COMMIT.
  const fs::path dir = fs::temp_directory_path() / ("vescale-prune-" + std::to_string(::getpid()));
  int interrupted = 0;
  for (int round = 0; round < 40; ++round) {
    const fs::path step = dir / "step-000001";
    fs::create_directories(step);
    std::ofstream(step / "COMMIT") << "step\n";
    for (int r = 0; r < 400; ++r)
      std::ofstream(step / ("rank-" + std::to_string(r) + ".h5")) << "x";
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      remove_step_folder(step);
      ::_exit(0);
    }
    ::usleep(static_cast<useconds_t>(100 + 50 * round));
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    if (fs::exists(step)) {
      int files = 0;
      for (const auto& entry : fs::directory_iterator(step))
        files += entry.path().extension() == ".h5";
      if (files < 400) {
        ++interrupted;
        EXPECT_FALSE(fs::exists(step / "COMMIT")) << "round " << round << ": " << files << " files";
      }
    }
    fs::remove_all(step);
  }
  fs::remove_all(dir);
  std::printf("pruning killed mid-way %d of 40 times: never a committed step missing a file\n",
              interrupted);
}

TEST(Crc32c, KnownValuesAndChaining) {
  const std::string check = "123456789";
  EXPECT_EQ(crc32c(check.data(), check.size()), 0xE3069283u);
  EXPECT_EQ(crc32c(nullptr, 0), 0u);
  std::string bytes(1000, '\0');
  for (size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<char>(i * 7);
  EXPECT_EQ(crc32c(bytes.data() + 333, 667, crc32c(bytes.data(), 333)),
            crc32c(bytes.data(), bytes.size()));
}

}  // namespace
}  // namespace vescale
