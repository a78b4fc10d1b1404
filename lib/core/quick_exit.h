// How a process of ours ends: its output flushed, LibTorch's static destructors skipped.
#pragma once

namespace vescale {

/// Flushes stdout, stderr and the logger, then ends the process with `code` at once, without
/// running static destructors or atexit handlers (NOTE [Quick exit]). For the end of main only:
/// whatever the program owns must be closed by then.
[[noreturn]] void exit_flushed(int code);

}  // namespace vescale
