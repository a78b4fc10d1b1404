// The local launcher's output: the workers' stdout and stderr forwarded line by line (prefixed
// "[rank N] "), their heartbeat lines read into the liveness monitor, and the launcher's own
// lines. Internal to launch/.
#pragma once

#include <string>

#include "launch/local_launcher.h"

namespace vescale::detail {

struct Supervision;

/// The launcher's own output: a failed write (a closed terminal) is not worth failing for.
void write_all(int fd, const std::string& text);

/// Waits up to 100 ms for output and forwards it. False once every pipe is closed and every
/// worker has ended.
bool forward_output(Supervision& s, const LocalLaunchOptions& options);

}  // namespace vescale::detail
