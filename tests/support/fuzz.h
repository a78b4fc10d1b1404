// The loop every fuzz test runs (issue [26] item 4): seeded cases through a real reader, each one
// accepted or refused with a one-line UserError; any other exception, a case past its time or an
// allocation out of proportion to the case's input fails the test, naming the case. The counts
// and times are printed as one line.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "support/allocation_meter.h"

namespace vescale::testing {

struct FuzzLimits {
  double case_seconds = 20;                      ///< past it, a case is a hang: the test aborts
  size_t floor_bytes = size_t{16} << 20;         ///< any case may allocate this much at once
  double bytes_per_input_byte = 64;              ///< and this much more per byte of its input
  size_t total_floor_bytes = size_t{256} << 20;  ///< all its requests together
  double total_per_input_byte = 4096;
};

/// The whole of the file at `path`, bytes as they are: what a fuzz case starts from.
std::string read_bytes(const std::string& path);
/// `bytes` as the whole of the file at `path` (created or truncated): a damaged input written.
void write_bytes(const std::string& path, const std::string& bytes);

class FuzzRun {
 public:
  explicit FuzzRun(std::string name, FuzzLimits limits = {});
  ~FuzzRun();
  FuzzRun(const FuzzRun&) = delete;
  FuzzRun& operator=(const FuzzRun&) = delete;

  /// Runs `read` as case `label`, whose input is `input_bytes` long. Returns whether it was
  /// accepted (no exception); a refusal must be a UserError of one line.
  bool one(const std::string& label, size_t input_bytes, const std::function<void()>& read);

  /// Prints "<name> fuzz: N cases: A accepted, R refused, 0 other; ..." and expects at least
  /// `min_cases` cases, both outcomes, and all of them within `max_seconds`.
  void finish(int min_cases, double max_seconds);

 private:
  void watch();

  std::string name_;
  FuzzLimits limits_;
  int accepted_ = 0, refused_ = 0, other_ = 0;
  double slowest_s_ = 0;
  size_t largest_ = 0, largest_input_ = 0;  ///< the largest allocation, and its case's input
  std::chrono::steady_clock::time_point start_;

  std::mutex mu_;  // the watchdog's view of the case in flight
  std::condition_variable cv_;
  std::string current_;
  std::chrono::steady_clock::time_point deadline_;
  bool in_case_ = false, done_ = false;
  std::thread watchdog_;
};

}  // namespace vescale::testing
