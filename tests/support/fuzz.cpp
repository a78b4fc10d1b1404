#include "support/fuzz.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/units.h"

namespace vescale::testing {

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

FuzzRun::FuzzRun(std::string name, FuzzLimits limits)
    : name_(std::move(name)),
      limits_(limits),
      start_(std::chrono::steady_clock::now()),
      watchdog_([this] { watch(); }) {}

FuzzRun::~FuzzRun() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  watchdog_.join();
}

void FuzzRun::watch() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!done_) {
    if (!in_case_) {
      cv_.wait(lock);
      continue;
    }
    if (cv_.wait_until(lock, deadline_) == std::cv_status::timeout && in_case_ &&
        std::chrono::steady_clock::now() >= deadline_) {
      std::fprintf(stderr, "%s fuzz: case %s ran past %.0f s: a hang\n", name_.c_str(),
                   current_.c_str(), limits_.case_seconds);
      std::abort();
    }
  }
}

bool FuzzRun::one(const std::string& label, size_t input_bytes, const std::function<void()>& read) {
  const auto t0 = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    current_ = label;
    deadline_ = t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                         std::chrono::duration<double>(limits_.case_seconds));
    in_case_ = true;
  }
  cv_.notify_all();
  bool accepted = false;
  AllocationCounts counts;
  {
    AllocationMeter meter;
    try {
      read();
      accepted = true;
      ++accepted_;
    } catch (const UserError& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos)
          << name_ << " case " << label << ": a refusal of more than one line: " << e.what();
      ++refused_;
    } catch (const std::exception& e) {
      ADD_FAILURE() << name_ << " case " << label << ": not a user error: " << e.what();
      ++other_;
    }
    counts = meter.counts();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_case_ = false;
  }
  const double input = static_cast<double>(input_bytes);
  const double allowed =
      static_cast<double>(limits_.floor_bytes) + limits_.bytes_per_input_byte * input;
  const double allowed_total =
      static_cast<double>(limits_.total_floor_bytes) + limits_.total_per_input_byte * input;
  EXPECT_LE(static_cast<double>(counts.largest), allowed)
      << name_ << " case " << label << ": allocated " << format_bytes(counts.largest)
      << " at once for an input of " << format_bytes(input);
  EXPECT_LE(static_cast<double>(counts.total), allowed_total)
      << name_ << " case " << label << ": allocated " << format_bytes(counts.total)
      << " in all for an input of " << format_bytes(input);
  if (counts.largest > largest_) {
    largest_ = counts.largest;
    largest_input_ = input_bytes;
  }
  slowest_s_ = std::max(
      slowest_s_, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return accepted;
}

void FuzzRun::finish(int min_cases, double max_seconds) {
  const double total_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const int cases = accepted_ + refused_ + other_;
  std::printf(
      "%s fuzz: %d cases: %d accepted, %d refused by name, %d other; largest allocation %s (its "
      "input %s); slowest case %.3f s, all %.2f s\n",
      name_.c_str(), cases, accepted_, refused_, other_,
      format_bytes(static_cast<double>(largest_)).c_str(),
      format_bytes(static_cast<double>(largest_input_)).c_str(), slowest_s_, total_s);
  EXPECT_GE(cases, min_cases);
  EXPECT_GT(accepted_, 0) << name_ << ": no case was accepted; the mutations are too coarse";
  EXPECT_GT(refused_, 0) << name_ << ": no case was refused; the mutations are too mild";
  EXPECT_LT(total_s, max_seconds);
}

}  // namespace vescale::testing
