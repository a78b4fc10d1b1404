// Seeded mutations of text and bytes for the fuzz tests: hostile values put where values go,
// lines dropped, doubled or cut, bytes flipped.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace vescale::testing {

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}

  /// `text` with 1 to 3 edits: a value replaced by one of `hostile` (after a `=` or `:`, or in
  /// quotes), a line dropped, doubled or cut short, `hostile` inserted as a new line, a byte
  /// flipped, or raw bytes (NUL, invalid UTF-8) inserted.
  std::string text(const std::string& text, const std::vector<std::string>& hostile);
  /// `text` with one of its quoted strings (pairs of '"', no escapes) replaced by `value`: a key,
  /// a placement or a name changed while the syntax stays valid.
  std::string replace_quoted(const std::string& text, const std::string& value);
  /// Pretty-printed JSON `text` (one value per line) with 1 to 3 edits: half of them a value
  /// replaced by one of `hostile` with its line's comma kept (the syntax stays valid), the rest
  /// as text() makes them.
  std::string json(const std::string& text, const std::vector<std::string>& hostile);
  /// `bytes` with one byte in [begin, end) set to a different value; returns its offset.
  size_t flip_byte(std::string& bytes, size_t begin, size_t end);

  /// A number in [0, n).
  size_t below(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }

 private:
  std::string one_edit(const std::string& text, const std::vector<std::string>& hostile);
  std::mt19937_64 rng_;
};

/// Values that break parsers and ranges: NaN, infinities, huge and negative numbers, empty and
/// very long strings, wrong types, bad placements.
const std::vector<std::string>& hostile_values();
/// The same for JSON: numbers past int64 and double, wrong types, deep nesting.
const std::vector<std::string>& hostile_json_values();

}  // namespace vescale::testing
