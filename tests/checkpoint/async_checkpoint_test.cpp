// The background writer and the commit protocol an async save relies on (NOTE [Async
// checkpoints]): a failed write surfaces at the next wait, and a step one rank failed to write is
// never committed, so `latest` stays at the previous complete step.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "checkpoint/async_writer.h"
#include "checkpoint/checkpoint.h"
#include "core/error.h"
#include "support/run_ranks.h"
#include "support/training_runs.h"

namespace vescale {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

TEST(AsyncWriter, OneWriteAtATimeAndItsFailureAtTheNextWait) {
  AsyncWriter writer;
  std::atomic<int> done{0};
  writer.start([&] {
    std::this_thread::sleep_for(200ms);
    done = 1;
  });
  EXPECT_TRUE(writer.in_flight());
  writer.start([&] { done = done * 10 + 2; });  // waits for the first
  writer.wait();
  EXPECT_EQ(done.load(), 12);
  EXPECT_FALSE(writer.in_flight());
  writer.start([] { throw Error("[checkpoint] disk full"); });
  EXPECT_THROW(writer.wait(), Error);
  writer.wait();  // reported once
  writer.start([] { throw Error("[checkpoint] disk full"); });
  EXPECT_THROW(writer.start([] {}), Error);  // the next save sees the failure
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

TEST(AsyncCheckpoint, AStepOneRankFailedToWriteIsNeverCommitted) {
  const std::string dir = testing::fresh_folder("vescale-async-commit");
  comm::GroupOptions options;
  // Long enough for two ranks' fsyncs on a loaded CI machine; rank 1 outwaits it below.
  options.timeout = std::chrono::milliseconds(4000);
  testing::run_ranks(
      2,
      [&](const comm::Group& world) {
        CheckpointMeta meta;
        meta.world_size = 2;
        meta.step = 1;
        write_snapshot(snapshot_checkpoint(dir, CheckpointFormat::kSharded, {}, {}, meta, world, 0),
                       world);
        meta.step = 2;
        CheckpointSnapshot second =
            snapshot_checkpoint(dir, CheckpointFormat::kSharded, {}, {}, meta, world, 0);
        if (world.rank() == 1) {
          // A tensor HDF5 cannot store: rank 1's write fails half way, before the barrier.
          SavedPiece bad;
          bad.name = "model/bad";
          bad.tensor = at::zeros({2}, at::kBool);
          second.pieces.push_back(bad);
        }
        // As JobCheckpointer: the writer's barriers on a group of their own, so that the timed-out
        // barrier leaves the world group (and run_ranks' closing barrier) usable.
        const comm::Group writers = world.split({{0, 1}}, "world");
        AsyncWriter writer;
        writer.start([&] { write_snapshot(second, writers); });
        EXPECT_ANY_THROW(writer.wait());  // rank 1: the write; rank 0: the barrier's timeout
        if (world.rank() == 1) std::this_thread::sleep_for(5s);  // past rank 0's timeout
      },
      options);
  EXPECT_EQ(read_text(fs::path(dir) / "latest"), "step-000001");
  EXPECT_TRUE(fs::exists(fs::path(dir) / "step-000001" / "COMMIT"));
  EXPECT_FALSE(fs::exists(fs::path(dir) / "step-000002" / "COMMIT"));
  EXPECT_FALSE(fs::exists(fs::path(dir) / "step-000002" / "rank-00001.h5"));
  const CheckpointReader reader(dir);  // skips the uncommitted step
  EXPECT_EQ(reader.meta().step, 1);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace vescale
