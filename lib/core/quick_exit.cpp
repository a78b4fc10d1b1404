#include "core/quick_exit.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>

namespace vescale {

// NOTE [Quick exit]: a process of ours ends by _exit once its output is out, not by returning
// from main. What that skips is the static destructors, and those that cost are LibTorch's: they
// deregister its thousands of operators one by one, 16% of the CPU of `vescale-train --help`
// (0.17 s of 1.07 s, perf, 2026-11-28). Each rank of a short run, and each command a test runs,
// pays the start and the end of a LibTorch process and little else, so the suite spends much of
// its time there (docs/testing.md). Nothing of ours waits for exit: files, HDF5 handles, process
// groups, the async checkpoint writer's thread are closed by the scopes that own them before main
// returns (a checkpoint is committed, a metrics line written, before its call returns), the log
// goes to stderr unbuffered by spdlog and is flushed here anyway, and the detached watcher threads
// (heartbeat, flight watch) are ended by the kernel rather than outliving the statics they read
// during exit's destructors.
void exit_flushed(int code) {
  spdlog::apply_all([](const std::shared_ptr<spdlog::logger>& logger) { logger->flush(); });
  std::cout.flush();
  std::cerr.flush();
  std::clog.flush();
  std::fflush(nullptr);
  ::_exit(code);
}

}  // namespace vescale
