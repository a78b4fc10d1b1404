// When a rank dumps its flight recorder (NOTE [Flight recorder]), besides a failed or timed-out
// call of its own (group_impl.h) and the step comm.flight_recorder_dump (the training loop):
//   - SIGUSR1: dump and go on. The local launcher sends it to every worker when a rank stopped
//     answering, before it kills them, and passes on one it gets itself; an operator may send it
//     to any worker (`kill -USR1 PID`), under any launcher.
//   - SIGTERM or SIGINT, and then no collective of this process completes for kStuckAfterStop:
//     the rank is stuck, and its launcher or scheduler will kill it. A rank that saves and stops
//     (NOTE [Preemption]) completes collectives and dumps nothing.
// A thread of the process (started with the first watched recorder) does the dumping: a signal
// handler only sets a flag.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "comm/flight_recorder.h"

namespace vescale::comm {

/// How long a process may complete no collective after a stop signal before it dumps.
constexpr std::chrono::milliseconds kStuckAfterStop{2000};

/// Dumps `recorder` on SIGUSR1 and when stuck after a stop signal, for as long as it lives.
/// Installs the SIGUSR1 handler and starts the watching thread the first time.
void watch_flight(const std::shared_ptr<FlightRecorder>& recorder);

/// Dumps every watched recorder of this process now (what SIGUSR1 leads to); returns how many
/// were written.
int dump_watched_flights(const std::string& reason);

}  // namespace vescale::comm
