// Human units: byte sizes and durations, parsed from and printed for people.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vescale {

/// Parses "512", "1K", "4KiB", "16M", "1G" (powers of 1024). Throws UserError naming `what`.
int64_t parse_bytes(const std::string& text, const std::string& what = "size");

/// Parses a comma-separated list of sizes: "1K,1M,16M".
std::vector<int64_t> parse_byte_list(const std::string& text, const std::string& what = "sizes");

/// "1.0KiB", "16MiB", "512B".
std::string format_bytes(double bytes);

/// "4m10s", "2.3s", "850ms", "12us".
std::string format_duration(double seconds);

}  // namespace vescale
