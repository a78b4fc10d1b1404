// One diagnosis from every rank's flight recorder dump (NOTE [Flight recorder]): for each group,
// which sequence number each member reached, and the first collective on which they diverge.
//
//   tp group [2, 3]: rank 2 is in all_reduce #812 of step 57 (micro-batch 1, layer 1; in flight
//     for 12.3 s); rank 3 never entered it (it reached #811), its last call was send #88 to pp
//     rank 1 of step 57 (micro-batch 1, forward stage 1; done)
//   likely cause: rank 3 is in no call of comm/ (stuck in compute, data, I/O or a deadlock
//     outside collectives), and others wait for it
//
// The local launcher prints it when a job fails with dumps written; `vescale-train diagnose
// FOLDER` prints it for any launcher (torchrun, Slurm).
#pragma once

#include <string>
#include <vector>

namespace vescale::comm {

/// The flight folder of a dump folder: <dump_folder>/flight.
std::string flight_folder(const std::string& dump_folder);
/// <dump_folder>/flight/rank-N.json.
std::string flight_dump_file(const std::string& dump_folder, int rank);

/// The diagnosis of the dumps in `folder` (a flight folder, or a dump folder holding one).
/// Throws UserError when there is none, or a dump is not one.
std::string diagnose_flight(const std::string& folder);

/// A rank-N.json file of a flight folder: the rank its name says, and its path.
struct FlightDumpFile {
  int rank = -1;
  std::string path;
};

/// The rank-N.json files of a flight folder, sorted by rank (none: empty).
std::vector<FlightDumpFile> flight_dumps(const std::string& folder);

}  // namespace vescale::comm
