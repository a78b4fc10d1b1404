// SIGTERM and SIGINT as stop requests, for the launcher and the workers (NOTE [Preemption]).
//
// NOTE [One stop request, several signals]
// Schedulers deliver one stop request as several signals: GNU `timeout` signals its command and
// then its whole process group (the launcher gets two SIGTERMs), Slurm's `scancel` and systemd
// signal every process of the job at once (each worker gets one from them and one passed on by
// the launcher). So the signals a process gets within kStopSignalWindowNs of its first are that
// same request. A signal later than that forces an immediate stop: an operator's second Ctrl-C
// or `kill`, two seconds or more after the first, ends the job without waiting for its save.
#pragma once

#include <cstdint>

namespace vescale {

/// Signals this long after a process's first are the same stop request.
constexpr int64_t kStopSignalWindowNs = 2'000'000'000;

enum class StopSignal {
  kFirst,        ///< a stop request: save and stop
  kSameRequest,  ///< within the window of the first: nothing more to do
  kForce,        ///< later: stop at once
};

/// Records a SIGTERM/SIGINT arriving now in this process and says what it means.
/// Async-signal-safe: for signal handlers.
StopSignal note_stop_signal(int sig);

/// The signal of this process's stop request, or 0 when none came (since the last reset).
int stop_request_signal();

/// Forgets the signals so far: a handler that counts them is being installed.
void reset_stop_signals();

}  // namespace vescale
