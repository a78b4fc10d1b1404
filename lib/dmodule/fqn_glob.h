// Matching FQNs against plan keys: segments split by '.', '*' matches one segment, '**' any
// number of segments (none included).
#pragma once

#include <string>

namespace vescale {

bool fqn_matches(const std::string& pattern, const std::string& fqn);

}  // namespace vescale
