// The flight recorder (NOTE [Flight recorder]): its ring, the entries real collectives leave on
// 4 ranks, the dump a timeout writes, and the diagnosis of a hang from every rank's dump.
#include "comm/flight_recorder.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "comm/flight_diagnosis.h"
#include "comm/group.h"
#include "core/error.h"
#include "support/run_ranks.h"
#include "support/training_runs.h"

namespace vescale::comm {
namespace {

namespace fs = std::filesystem;

/// A new, empty folder under the temp directory.
fs::path fresh_folder(const std::string& name) {
  const fs::path dir = testing::fresh_folder("vescale-flight-" + name);
  fs::create_directories(dir);
  return dir;
}

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

TEST(FlightRecorder, KeepsTheLastCallsAndNumbersEachGroupApart) {
  FlightRecorder recorder(0, 4);
  const int world = recorder.add_group("world", {0, 1}, 0);
  const int pp = recorder.add_group("pp", {0, 1}, 0);
  recorder.set_step(7);
  recorder.set_micro_batch(2);
  const FlightSite site(recorder, "bucket 3");
  uint64_t last = 0;
  for (int i = 0; i < 5; ++i) {
    last = recorder.begin(world, false, "all_reduce", 64);
    recorder.end(last, FlightState::kDone);
  }
  const uint64_t send = recorder.begin(pp, true, "send", 128, 1);
  const uint64_t all_gather = recorder.begin(pp, false, "all_gather", 32);

  const std::vector<FlightEntry> kept = recorder.entries_after(0);
  ASSERT_EQ(kept.size(), 4u);  // the ring: the last 4 of 7 calls
  EXPECT_EQ(kept.front().id, 4u);
  EXPECT_EQ(kept.back().id, all_gather);
  EXPECT_EQ(kept[1].seq, 5u);  // world's 5th collective
  EXPECT_EQ(kept[2].id, send);
  EXPECT_TRUE(kept[2].transfer);
  EXPECT_EQ(kept[2].seq, 1u);  // transfers are numbered apart
  EXPECT_EQ(kept[2].peer, 1);
  EXPECT_EQ(kept[3].seq, 1u);  // pp's first collective
  EXPECT_EQ(kept[3].state, FlightState::kPosted);
  EXPECT_EQ(kept[1].state, FlightState::kDone);
  EXPECT_EQ(kept[3].step, 7);
  EXPECT_EQ(kept[3].micro_batch, 2);
  EXPECT_STREQ(kept[3].site.data(), "bucket 3");
  recorder.end(1, FlightState::kDone);  // dropped from the ring: nothing to do

  const nlohmann::json dump = nlohmann::json::parse(recorder.to_json("a test"));
  EXPECT_EQ(dump["reason"], "a test");
  EXPECT_EQ(dump["calls"], 7);
  EXPECT_EQ(dump["groups"][0]["collectives"], 5);
  EXPECT_EQ(dump["groups"][1]["transfers"], 1);
  EXPECT_EQ(dump["entries"].size(), 4u);
  EXPECT_EQ(dump["entries"][3]["state"], "posted");
  EXPECT_FALSE(dump["entries"][3].contains("end_s"));
}

TEST(FlightRecorder, OffKeepsSequenceNumbersOnly) {
  FlightRecorder recorder(0, 0);
  const int g = recorder.add_group("dp", {0, 1}, 0);
  EXPECT_EQ(recorder.begin(g, false, "all_reduce", 8), 0u);
  EXPECT_EQ(recorder.begin(g, false, "all_reduce", 8), 0u);
  EXPECT_TRUE(recorder.entries_after(0).empty());
  EXPECT_EQ(nlohmann::json::parse(recorder.to_json(""))["groups"][0]["collectives"], 2);
}

TEST(FlightRecorder, RealCollectivesLeaveMatchingEntriesOnEveryRank) {
  // 4 ranks, a world all-reduce, an all-gather on pairs {0,1} {2,3} and a ring of transfers:
  // every member numbers the same collective alike, and every call is done.
  std::vector<std::vector<FlightEntry>> seen(4);
  testing::run_ranks(4, [&](const Group& world) {
    const Group pairs = world.split({{0, 1}, {2, 3}}, "tp");
    at::Tensor t = at::ones({16});
    world.all_reduce(t);
    pairs.all_gather(at::ones({3, 2}) * world.rank(), 0, {3, 3});  // equal pieces: one call
    pairs.all_gather(at::ones({world.rank() + 1}), 0);             // sizes exchanged, then uneven
    at::Tensor in = at::zeros({5});
    world.send_recv(at::ones({5}), (world.rank() + 1) % 4, in, (world.rank() + 3) % 4);
    seen[static_cast<size_t>(world.rank())] = world.flight()->entries_after(0);
  });
  for (int r = 0; r < 4; ++r) {
    const std::vector<FlightEntry>& e = seen[static_cast<size_t>(r)];
    ASSERT_EQ(e.size(), 6u) << "rank " << r;
    EXPECT_STREQ(e[0].op, "all_reduce");
    EXPECT_EQ(e[0].bytes, 64);
    EXPECT_EQ(e[0].seq, 1u);
    EXPECT_STREQ(e[1].op, "all_gather");
    EXPECT_EQ(e[1].seq, 1u);
    EXPECT_EQ(e[2].seq, 2u);  // the size exchange
    EXPECT_EQ(e[3].seq, 3u);  // the uneven all-gather
    EXPECT_TRUE(e[4].transfer);
    EXPECT_STREQ(e[4].op, "send");
    EXPECT_EQ(e[4].peer, (r + 1) % 4);
    EXPECT_STREQ(e[5].op, "recv");
    EXPECT_EQ(e[5].seq, 2u);
    for (const FlightEntry& entry : e) {
      EXPECT_EQ(entry.state, FlightState::kDone);
      EXPECT_GE(entry.end_s, entry.start_s);
    }
  }
}

TEST(FlightRecorder, ATimeoutDumpsAndTheDiagnosisNamesTheRankThatNeverCame) {
  // Rank 1 posts nothing; rank 0's all-reduce times out and dumps. Rank 1 dumps on demand.
  const fs::path dir = fresh_folder("timeout");
  GroupOptions options;
  options.timeout = std::chrono::milliseconds(1000);
  const Store store = Store::in_memory();
  std::thread rank1([&] {
    Group g = Group::create(store, 1, 2, options);
    g.flight()->set_dump_file((dir / "rank-1.json").string());
    at::Tensor t = at::ones({4});
    g.all_reduce(t);  // #1, done with rank 0
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    EXPECT_TRUE(g.flight()->dump("on demand"));
  });
  {
    Group g = Group::create(store, 0, 2, options);
    g.flight()->set_dump_file((dir / "rank-0.json").string());
    g.flight()->set_step(3);
    at::Tensor t = at::ones({4});
    g.all_reduce(t);
    EXPECT_THROW(g.all_reduce(t), TimeoutError);  // #2: rank 1 never comes
    rank1.join();
  }
  const nlohmann::json dump = read_json(dir / "rank-0.json");
  EXPECT_NE(dump["reason"].get<std::string>().find("all_reduce"), std::string::npos);
  EXPECT_EQ(dump["entries"].back()["state"], "failed");
  EXPECT_EQ(dump["entries"].back()["seq"], 2);

  const std::string text = diagnose_flight(dir.string());
  std::printf("%s", text.c_str());
  EXPECT_NE(text.find("world group [0, 1]: rank 0 was in all_reduce #2 of step 3 (failed after"),
            std::string::npos);
  EXPECT_NE(text.find("rank 1 never entered it (it reached #1), its last call was all_reduce #1"),
            std::string::npos);
  EXPECT_NE(text.find("likely cause: rank 1 is in no call of comm/"), std::string::npos);
  fs::remove_all(dir);
}

/// A recorder of rank `rank` of a world of 4 with tp pairs {0,1} {2,3} and a second dim's pairs
/// {0,2} {1,3} named `second` (pp, dp), at step `step`.
std::unique_ptr<FlightRecorder> four_rank_recorder(int rank, const std::string& second,
                                                   int64_t step) {
  auto r = std::make_unique<FlightRecorder>(rank, 64);
  r->add_group("world", {0, 1, 2, 3}, rank);
  r->add_group("tp", rank < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3}, rank % 2);
  r->add_group(second, rank % 2 == 0 ? std::vector<int>{0, 2} : std::vector<int>{1, 3}, rank / 2);
  r->set_step(step);
  return r;
}

TEST(FlightRecorder, ARankWhoseCallTimedOutIsAVictimNotACause) {
  // World 4: tp pairs {0,1} {2,3}, dp pairs {0,2} {1,3}. Rank 1 hangs in compute after its dp
  // all_reduce #1. Rank 0's tp all_reduce #4 with it timed out (failed); ranks 2 and 3 wait in
  // dp all_reduce #2, for ranks 0 and 1. Only rank 1 is the cause.
  const fs::path dir = fresh_folder("victim");
  auto r0 = four_rank_recorder(0, "dp", 4);
  auto r1 = four_rank_recorder(1, "dp", 4);
  auto r2 = four_rank_recorder(2, "dp", 4);
  auto r3 = four_rank_recorder(3, "dp", 4);
  for (FlightRecorder* r : {r0.get(), r1.get(), r2.get(), r3.get()}) {
    for (int i = 0; i < 3; ++i)
      r->end(r->begin(1, false, "all_reduce", 256), FlightState::kDone);
    r->end(r->begin(2, false, "all_reduce", 256), FlightState::kDone);
  }
  r0->end(r0->begin(1, false, "all_reduce", 256), FlightState::kFailed);
  for (FlightRecorder* r : {r2.get(), r3.get()}) {
    r->end(r->begin(1, false, "all_reduce", 256), FlightState::kDone);
    r->waiting(r->begin(2, false, "all_reduce", 256));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  for (auto* r : {r0.get(), r1.get(), r2.get(), r3.get()}) {
    r->set_dump_file((dir / ("rank-" + std::to_string(r->rank()) + ".json")).string());
    ASSERT_TRUE(r->dump("SIGUSR1: a dump on demand"));
  }
  const std::string text = diagnose_flight(dir.string());
  std::printf("%s", text.c_str());
  EXPECT_NE(text.find("tp group [0, 1]: rank 0 was in all_reduce #4 of step 4 (failed after"),
            std::string::npos);
  EXPECT_NE(text.find("likely cause: rank 1 is in no call of comm/"), std::string::npos);
  EXPECT_EQ(text.find("rank 0 is in no call of comm/"), std::string::npos);
  fs::remove_all(dir);
}

TEST(FlightRecorder, DiagnosisFollowsAHangAcrossGroupsAndNamesMissingDumps) {
  // World 4: tp pairs {0,1} {2,3}, pp pairs {0,2} {1,3}. Rank 3 sent to pp rank 1 and then
  // stopped; rank 2 waits in tp all_reduce #5; rank 1 wrote no dump.
  const fs::path dir = fresh_folder("hang");
  auto r0 = four_rank_recorder(0, "pp", 57);
  auto r2 = four_rank_recorder(2, "pp", 57);
  auto r3 = four_rank_recorder(3, "pp", 57);
  for (FlightRecorder* r : {r0.get(), r2.get(), r3.get()}) {
    for (int i = 0; i < 4; ++i)
      r->end(r->begin(1, false, "all_reduce", 256), FlightState::kDone);
  }
  r3->end(r3->begin(2, true, "send", 512, 0), FlightState::kDone);
  r2->set_micro_batch(1);
  r2->set_site("layer 1");
  r2->waiting(r2->begin(1, false, "all_reduce", 256));  // #5: rank 3 never comes
  r0->waiting(r0->begin(1, false, "all_reduce", 256));  // rank 0 waits for rank 1 in its #5
  // Blocked a while: a wait of a few milliseconds is a running job's, not a hang.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  for (auto* r : {r0.get(), r2.get(), r3.get()}) {
    r->set_dump_file((dir / ("rank-" + std::to_string(r->rank()) + ".json")).string());
    ASSERT_TRUE(r->dump("SIGUSR1: a dump on demand"));
  }
  const std::string text = diagnose_flight(dir.string());
  std::printf("%s", text.c_str());
  EXPECT_NE(text.find("flight recorder dumps of 3 of 4 ranks"), std::string::npos);
  EXPECT_NE(text.find("tp group [2, 3]: rank 2 is in all_reduce #5 of step 57 (micro-batch 1, "
                      "layer 1; blocked in it for"),
            std::string::npos);
  EXPECT_NE(text.find("rank 3 never entered it (it reached #4), its last call was send #1 to pp "
                      "rank 1 of step 57 (done)"),
            std::string::npos);
  EXPECT_NE(text.find("tp group [0, 1]: rank 1 wrote no dump"), std::string::npos);
  EXPECT_NE(text.find("likely cause: rank 3 is in no call of comm/"), std::string::npos);
  EXPECT_NE(text.find("rank 1 wrote no dump (it died"), std::string::npos);
  // The dump folder works as well as its flight folder.
  const fs::path job = fresh_folder("job");
  fs::rename(dir, job / "flight");
  const std::string from_job = diagnose_flight(job.string());
  EXPECT_EQ(from_job.substr(from_job.find('\n')), text.substr(text.find('\n')));
  fs::remove_all(job);
}

TEST(FlightRecorder, DiagnoseRefusesAFolderWithoutDumps) {
  const fs::path dir = fresh_folder("empty");
  EXPECT_THROW(diagnose_flight(dir.string()), UserError);
  std::ofstream(dir / "rank-0.json") << "{\"format\": \"something else\"}";
  try {
    diagnose_flight(dir.string());
    ADD_FAILURE() << "a file that is no dump was read";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("rank-0.json is not a flight recorder dump"),
              std::string::npos);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace vescale::comm
