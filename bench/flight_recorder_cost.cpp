// What the flight recorder costs a call (NOTE [Flight recorder]): the time of begin, waiting and
// end on one rank's recorder, as comm/ makes them for every collective and transfer, with the
// site changing every few calls as the layers' do. scripts/bench.sh (BENCH=flight) multiplies it
// by the calls of a step.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "comm/flight_recorder.h"

int main(int argc, char** argv) {
  const long calls = argc > 1 ? std::atol(argv[1]) : 2'000'000;
  vescale::comm::FlightRecorder recorder(0, 4096);
  const int groups[] = {recorder.add_group("tp", {0, 1}, 0), recorder.add_group("dp", {0, 2}, 0),
                        recorder.add_group("pp", {0, 4}, 0)};
  const std::string sites[] = {"layer 0", "layer 1", "bucket 0", "forward stage 0"};
  double best = 1e30;
  for (int round = 0; round < 5; ++round) {
    const auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < calls; ++i) {
      if (i % 8 == 0) recorder.set_site(sites[(i / 8) % 4]);
      const uint64_t id = recorder.begin(groups[i % 3], i % 5 == 0, "all_reduce", 4096, 1);
      recorder.waiting(id);
      recorder.end(id, vescale::comm::FlightState::kDone);
    }
    const double ns =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() /
        static_cast<double>(calls);
    best = std::min(best, ns);
  }
  std::printf(
      "flight recorder: %.1f ns a call (begin, waiting, end; a site change every 8 calls), "
      "best of 5 rounds of %ld calls\n",
      best, calls);
  return 0;
}
