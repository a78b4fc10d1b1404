// The local launcher's workers as processes: spawned with their environment and pipes, signalled,
// and their ends described. Internal to launch/.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "launch/local_launcher.h"

namespace vescale::detail {

/// One worker process and the read ends of its pipes.
struct Worker {
  int rank = 0;
  pid_t pid = -1;
  int out_fd = -1;  // read ends of the worker's stdout, stderr and heartbeat pipes
  int err_fd = -1;
  int beat_fd = -1;
  std::string out_partial, err_partial, beat_partial;
  std::string last_line;
  bool running = true;
  int status = 0;
};

/// Spawns options.nproc workers running `argv` (attempt `attempt`, meeting in `store_file`) and
/// says on stderr which pid each rank has.
std::vector<Worker> spawn_all(const LocalLaunchOptions& options,
                              const std::vector<std::string>& argv, const std::string& store_file,
                              int attempt);
/// How a worker ended: "exited with code 1", "was killed by signal 9 (Killed)".
std::string describe_status(int status);
/// Whether a worker that ended with `status` failed: killed by a signal, or a non-zero exit.
bool failed(int status);
/// Sends `sig` to every worker still running.
void signal_all(std::vector<Worker>& workers, int sig);

}  // namespace vescale::detail
