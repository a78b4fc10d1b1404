// Errors: exceptions only. The library never exits or prints; app/ catches and reports.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace vescale {

/// An internal invariant failed: a bug in vescale-train or in how a caller used the library.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A user mistake (config, plan, CLI, checkpoint file). The message names the file, key or tensor
/// and says what would be valid.
class UserError : public Error {
 public:
  using Error::Error;
};

/// Training produced a loss or gradient norm that is not finite and the job stops
/// (NOTE [Non-finite steps]). The command exits with code 3.
class DivergedError : public Error {
 public:
  using Error::Error;
};

/// A collective or rendezvous did not complete within its timeout.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

}  // namespace vescale

/// Throws vescale::Error with a formatted message when `cond` is false.
/// Messages start with their area: VS_CHECK(ok, "[mesh] dim {} out of range", d).
#define VS_CHECK(cond, ...)                                        \
  do {                                                             \
    if (!(cond)) throw ::vescale::Error(fmt::format(__VA_ARGS__)); \
  } while (false)

/// Like VS_CHECK, for mistakes in what the user gave us.
#define VS_USER_CHECK(cond, ...)                                       \
  do {                                                                 \
    if (!(cond)) throw ::vescale::UserError(fmt::format(__VA_ARGS__)); \
  } while (false)
