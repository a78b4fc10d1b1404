// Memory meter: counts the bytes of CPU tensors as c10's CPU allocator hands them out and takes
// them back, live and peak, so that metrics report memory measured from allocations (e.g. the
// activations of a step) instead of derived from a config.
#pragma once

#include <cstdint>

namespace vescale {

/// Wraps this process's c10 CPU allocator in one that counts bytes; once per process (later
/// calls do nothing). Call it at process start, before other threads allocate: c10 swaps
/// allocators without a lock. Memory allocated before it is never counted, nor its frees.
void install_memory_meter();
/// Whether install_memory_meter() ran in this process.
bool memory_meter_installed();
/// Bytes of CPU allocations made since the meter was installed and not freed yet (0 without it).
int64_t metered_live_bytes();
/// The most live bytes since install or the last reset_metered_peak().
int64_t metered_peak_bytes();
/// Allocations since install of more bytes than a scalar (16): the tensors a stretch of code makes,
/// apart from the 0-dim ones that ATen wraps host scalars in (on a GPU those stay on the host).
int64_t metered_tensor_allocations();
/// Starts the peak over from the live bytes now.
void reset_metered_peak();

}  // namespace vescale
