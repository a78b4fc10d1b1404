// A worker's heartbeat to the local launcher, which tells a rank that stopped answering from the
// ranks that wait for it.
//
// NOTE [Heartbeat]
// When a rank stops (SIGSTOP, a hang in the kernel, a deadlock in compute), the other ranks wait in
// their next collective until comm.timeout_s and then fail, each naming its own collective: the
// first to fail is a victim, not the cause. So each worker of the local launcher runs a thread that
// writes one line a second to a pipe the launcher gave it (VESCALE_HEARTBEAT_FD):
//     "<progress> <waiting> <stall_ms>\n"
// progress counts the collectives this process has finished, waiting is how many it is in now
// (a wait in comm/ holds a WaitScope), and stall_ms is comm.timeout_s. The launcher
// (launch/local_launcher.cpp) then knows, without clocks shared between processes:
//   - a rank whose lines stop for min(stall, 10 s) has stopped answering (stopped, or hung so
//     hard that even this thread cannot run);
//   - a rank that is in no collective and whose progress has not moved for the stall time while
//     another rank waits in one (or waited, until its collective failed) is stuck outside a
//     collective (a deadlock or a livelock in compute).
// Either way it stops the job at once and names that rank; and when a worker fails first (its
// collective timed out), the failure report names the rank it was waiting for.
#pragma once

#include <chrono>
#include <cstdint>

namespace vescale::heartbeat {

/// Held while this process waits for a collective or transfer to complete.
class WaitScope {
 public:
  WaitScope();
  ~WaitScope();
  WaitScope(const WaitScope&) = delete;
  WaitScope& operator=(const WaitScope&) = delete;
};

/// One beat: what the line says.
struct Beat {
  uint64_t progress = 0;
  int64_t waiting = 0;
  int64_t stall_ms = 0;
};

/// The beat this process would send now.
Beat current();

/// How long this process may make no progress outside a collective (comm.timeout_s).
void set_stall_limit(std::chrono::milliseconds limit);

/// Starts the beating thread when the launcher asked for it (VESCALE_HEARTBEAT_FD); once per
/// process. The thread runs until the process exits.
void start_from_env();

/// "<progress> <waiting> <stall_ms>" as the launcher reads it; false if `line` is not one.
bool parse(const char* line, Beat& beat);

}  // namespace vescale::heartbeat
