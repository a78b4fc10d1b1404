// Issue [26] item 4: seeded fuzzing of flight recorder dumps through `vescale-train diagnose`'s
// reader (diagnose_flight). The dumps of a hang on 4 ranks (one rank's missing) are damaged one
// file at a time; each folder must be refused by name, or diagnosed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "comm/flight_diagnosis.h"
#include "comm/flight_recorder.h"
#include "support/fuzz.h"
#include "support/mutate.h"
#include "support/training_runs.h"

namespace vescale::comm {
namespace {

namespace fs = std::filesystem;

/// Ranks 0, 2 and 3 of a world of 4 (tp pairs {0,1} {2,3}, pp pairs {0,2} {1,3}): rank 2 waits
/// in tp all_reduce #5 that rank 3 never entered. Pretty-printed, one value per line.
std::map<int, std::string> hang_dumps() {
  std::map<int, std::string> dumps;
  for (int rank : {0, 2, 3}) {
    FlightRecorder r(rank, 64);
    r.set_run_id("run-1");
    r.add_group("world", {0, 1, 2, 3}, rank);
    r.add_group("tp", rank < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3}, rank % 2);
    r.add_group("pp", rank % 2 == 0 ? std::vector<int>{0, 2} : std::vector<int>{1, 3}, rank / 2);
    r.set_step(57);
    for (int i = 0; i < 4; ++i)
      r.end(r.begin(1, false, "all_reduce", 256), FlightState::kDone);
    if (rank == 3) r.end(r.begin(2, true, "send", 512, 0), FlightState::kDone);
    if (rank != 3) r.waiting(r.begin(1, false, "all_reduce", 256));
    nlohmann::json dump = nlohmann::json::parse(r.to_json("SIGUSR1: a dump on demand"));
    dump["now_s"] = dump["now_s"].get<double>() + 5;  // blocked for 5 s, without the wait
    dumps[rank] = dump.dump(2);
  }
  return dumps;
}

TEST(Fuzz, DamagedFlightDumpsAreRefusedByNameOrDiagnosed) {
  const std::map<int, std::string> dumps = hang_dumps();
  const fs::path dir = testing::fresh_folder("vescale-flight-fuzz");
  const auto write_all = [&](const std::map<int, std::string>& files) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    for (const auto& [rank, text] : files)
      std::ofstream(dir / ("rank-" + std::to_string(rank) + ".json")) << text;
  };
  write_all(dumps);
  const std::string intact = diagnose_flight(dir.string());
  ASSERT_NE(intact.find("rank 2 is in all_reduce #5"), std::string::npos) << intact;

  testing::Mutator mutate(20261126);
  testing::FuzzRun run("flight dump");
  for (int i = 0; i < 1200; ++i) {
    std::map<int, std::string> files = dumps;
    auto victim = files.begin();
    std::advance(victim, static_cast<std::ptrdiff_t>(mutate.below(files.size())));
    victim->second = mutate.json(victim->second, testing::hostile_json_values());
    if (i % 40 == 0) {  // the same dump under another rank's name
      files[1] = victim->second;
    }
    write_all(files);
    size_t bytes = 0;
    for (const auto& [rank, text] : files)
      bytes += text.size();
    run.one(std::to_string(i) + " (rank-" + std::to_string(victim->first) + ".json)", bytes, [&] {
      const std::string diagnosis = diagnose_flight(dir.string());
      EXPECT_NE(diagnosis.find("flight recorder dumps of"), std::string::npos) << diagnosis;
    });
  }
  fs::remove_all(dir);
  run.finish(1000, 90);
}

}  // namespace
}  // namespace vescale::comm
