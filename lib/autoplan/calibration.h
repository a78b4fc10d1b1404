// plan auto's calibration (NOTE [Plan auto]): the machine facts of `comm bench --calibrate`, from
// the bench's timed collectives, each rank's compute measured while all run, and the framework's
// time under each tp plan on every group the mesh has.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "autoplan/machine_facts.h"

namespace vescale {
class DeviceMesh;
namespace comm {
class Group;
}
}  // namespace vescale

namespace vescale::autoplan {

/// One timed collective of the bench: its name, the size of its group, the message and the
/// seconds per call (the slowest rank's).
struct CommSample {
  std::string op;
  int64_t group_size = 0;
  int64_t bytes = 0;
  double seconds = 0;
};

/// The facts of this machine for `mesh` (whose world group is `world`): every rank measures its
/// compute and the framework's time at once and the figures are averaged over the ranks; each
/// collective and group size gets the latency and bandwidth fitted through `samples` (a size's
/// slowest dim). *Collective* over `world`; the facts on rank 0, nullopt elsewhere.
/// `local_ranks`: the ranks on this machine (the thread budget they ran with is recorded).
std::optional<MachineFacts> calibrate_machine(const std::vector<CommSample>& samples,
                                              const DeviceMesh& mesh, const comm::Group& world,
                                              int local_ranks);

}  // namespace vescale::autoplan
