#include "core/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <atomic>

#include "core/error.h"

namespace vescale {
namespace {
std::atomic<int> g_rank{0};
}  // namespace

void init_logging(const LogOptions& options) {
  g_rank = options.rank;
  auto level = spdlog::level::from_str(options.level);
  VS_USER_CHECK(level != spdlog::level::off || options.level == "off",
                "[logging] unknown log level '{}': use trace, debug, info, warn, error or off",
                options.level);
  // Log to stderr: stdout is for the results a command prints (tables, reports).
  spdlog::drop("vescale");
  auto logger = spdlog::stderr_color_mt("vescale");
  spdlog::set_default_logger(logger);
  spdlog::set_level(level);
  if (options.prefix_rank && options.world > 1) {
    spdlog::set_pattern(fmt::format("[%H:%M:%S] [rank {}] %^%l%$ %v", options.rank));
  } else {
    spdlog::set_pattern("[%H:%M:%S] %^%l%$ %v");
  }
}

int log_rank() {
  return g_rank;
}

}  // namespace vescale
