// Host work split over the cores a rank may use, outside ATen's intra-op pool (which a rank keeps
// at one thread: NOTE [Thread budget]). For work that has the cores to itself while it runs, such
// as building the parameters before the first step (NOTE [Fast init] in dtensor/random.cpp).
#pragma once

#include <cstdint>
#include <functional>

namespace vescale {

/// The cores this rank may use: its share of the machine, set from its thread budget
/// (core/thread_budget.h). Before any budget is applied: every core of the machine.
int rank_cores();
void set_rank_cores(int cores);

/// Calls f(begin, end) over [0, n) in contiguous ranges of about equal size, on up to
/// min(rank_cores(), n / grain) threads (the caller's among them), and returns when every range
/// is done. The first exception a range throws is rethrown here.
void host_parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& f);

}  // namespace vescale
