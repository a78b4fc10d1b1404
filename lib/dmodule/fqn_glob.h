// Matching FQNs against plan keys: segments split by '.', '*' matches one segment, '**' any
// number of segments (none included).
#pragma once

#include <string>
#include <vector>

namespace vescale {

bool fqn_matches(const std::string& pattern, const std::string& fqn);

/// Edit distance, for "did you mean" suggestions.
size_t edit_distance(const std::string& a, const std::string& b);
/// The candidates closest to `word` (at most `count`, within a sensible distance).
std::vector<std::string> near_matches(const std::string& word,
                                      const std::vector<std::string>& candidates, size_t count = 3);

}  // namespace vescale
