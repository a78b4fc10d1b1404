// Multi-rank tests in one process: ranks are threads over Gloo on loopback.
#pragma once

#include <functional>

#include "comm/group.h"

namespace vescale::testing {

/// Runs fn(world_group) on `world` threads, each a rank connected through an in-memory store,
/// and rethrows the first exception a rank threw. Ranks are torn down together.
void run_ranks(int world, const std::function<void(const comm::Group& world)>& fn,
               comm::GroupOptions options = {});

}  // namespace vescale::testing
