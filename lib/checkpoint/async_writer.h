// One background thread that runs checkpoint writes while training goes on: one write at a time,
// its failure rethrown to whoever waits for it next.
#pragma once

#include <exception>
#include <functional>
#include <thread>

namespace vescale {

class AsyncWriter {
 public:
  AsyncWriter() = default;
  AsyncWriter(const AsyncWriter&) = delete;
  AsyncWriter& operator=(const AsyncWriter&) = delete;
  /// Waits for the write in flight; a failure is logged, not thrown (we may be unwinding).
  ~AsyncWriter();

  /// Runs `write` on the background thread after waiting for the previous one (see wait()).
  void start(std::function<void()> write);
  /// Waits for the write in flight, if any, and rethrows the exception it ended with.
  void wait();
  /// True while a write has been started and not waited for.
  bool in_flight() const { return thread_.joinable(); }

 private:
  std::thread thread_;
  std::exception_ptr error_;
};

}  // namespace vescale
