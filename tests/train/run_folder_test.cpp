// metrics.jsonl made a run's before its first line (NOTE [One run per dump folder]): a run resumed
// from a checkpoint of step s drops its lines after s and a torn last line, keeping every other
// line as it was; a fresh run leaves the file's lines as they are.
#include "train/run_folder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "train/metrics.h"

namespace vescale {
namespace {

namespace fs = std::filesystem;

constexpr const char* kRunId = "00112233aabbccdd";

/// A line of run kRunId's metrics.jsonl at `step`.
std::string step_line(int step) {
  return "{\"run_id\":\"" + std::string(kRunId) + "\",\"step\":" + std::to_string(step) +
         ",\"loss\":" + std::to_string(10 - step) + ".5}\n";
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// A fresh folder holding metrics.jsonl with steps 1..10 (after step 3 a line without a step, and
/// after step 5 one that is not JSON) and the torn start of step 11's line.
fs::path folder_with_torn_metrics(const std::string& name, std::string* kept_through_6) {
  const fs::path folder =
      fs::temp_directory_path() / ("vescale-run-folder-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(folder);
  fs::create_directories(folder);
  std::string text;
  for (int step = 1; step <= 10; ++step) {
    text += step_line(step);
    if (step == 3) text += "{\"run_id\":\"" + std::string(kRunId) + "\",\"note\":\"no step\"}\n";
    if (step == 5) text += "not json, kept where it is\n";
    if (step == 6) *kept_through_6 = text;
  }
  text += "{\"run_id\":\"" + std::string(kRunId) + "\",\"step\":11,\"lo";  // no newline
  std::ofstream(folder / "metrics.jsonl", std::ios::binary) << text;
  return folder;
}

TEST(RunFolder, AResumedRunDropsItsMetricsLinesAfterTheResumeStep) {
  std::string expected;
  const fs::path folder = folder_with_torn_metrics("resumed", &expected);
  const fs::path metrics = folder / "metrics.jsonl";

  claim_metrics_file(metrics, kRunId, /*resumed_from=*/6);
  // Steps 1..6 only, the lines without a step kept in place; steps 7..10 and the torn line gone.
  EXPECT_EQ(read_text(metrics), expected);
  EXPECT_FALSE(fs::exists(folder / "metrics.jsonl.tmp"));
  EXPECT_EQ(fs::status(metrics).permissions() & fs::perms::others_write, fs::perms::none);

  // Resumed again from the same step: nothing left to drop, the file as it was.
  EXPECT_EQ(drop_metrics_after(metrics, 6), 0);
  EXPECT_EQ(read_text(metrics), expected);
  // The count: 4 steps after 3, and no torn line now.
  EXPECT_EQ(drop_metrics_after(metrics, 3), 3);
  fs::remove_all(folder);
}

TEST(RunFolder, ATornLastLineAloneIsDroppedAndCounted) {
  std::string through_6;
  const fs::path folder = folder_with_torn_metrics("torn", &through_6);
  const fs::path metrics = folder / "metrics.jsonl";
  const std::string before = read_text(metrics);
  EXPECT_EQ(drop_metrics_after(metrics, 10), 1);
  EXPECT_EQ(read_text(metrics), before.substr(0, before.rfind('\n') + 1));
  fs::remove_all(folder);
}

TEST(RunFolder, AFreshRunLeavesTheMetricsLinesAlone) {
  std::string unused;
  const fs::path folder = folder_with_torn_metrics("fresh", &unused);
  const fs::path metrics = folder / "metrics.jsonl";
  const std::string before = read_text(metrics);

  // Not resumed: no line is dropped, even with the file's own run id.
  claim_metrics_file(metrics, kRunId, std::nullopt);
  EXPECT_EQ(read_text(metrics), before);

  // Another run's file is moved aside whole, resumed or not.
  claim_metrics_file(metrics, "ffffeeeeddddcccc", /*resumed_from=*/6);
  EXPECT_FALSE(fs::exists(metrics));
  EXPECT_EQ(read_text(folder / ("metrics." + std::string(kRunId) + ".jsonl")), before);
  fs::remove_all(folder);
}

}  // namespace
}  // namespace vescale
