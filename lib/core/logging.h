// One logger for the whole program: rank-aware, over spdlog.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace vescale {

struct LogOptions {
  int rank = 0;
  int world = 1;
  /// Put "[rank N]" in every line. Off when a launcher already prefixes our output.
  bool prefix_rank = true;
  std::string level = "info";  ///< trace, debug, info, warn, error
};

/// Configures the process-wide logger. Safe to call again (e.g. once the rank is known).
void init_logging(const LogOptions& options);

/// This process's rank as given to init_logging (0 before).
int log_rank();

/// Logs at info level on rank 0 only: summaries that every rank would repeat.
template <typename... Args>
void log_rank0(fmt::format_string<Args...> format, Args&&... args) {
  if (log_rank() == 0) spdlog::info(format, std::forward<Args>(args)...);
}

}  // namespace vescale
