// "Did you mean ...?": the nearest candidates to a misspelled word.
#pragma once

#include <string>
#include <vector>

namespace vescale {

/// Edit (Levenshtein) distance.
size_t edit_distance(const std::string& a, const std::string& b);
/// The candidates closest to `word` (at most `count`, within a sensible distance), nearest first.
std::vector<std::string> near_matches(const std::string& word,
                                      const std::vector<std::string>& candidates, size_t count = 3);
/// " (did you mean 'nearest'?)" for the candidate nearest to `word`, or "" when none is near:
/// the suffix of an error that names an unknown word.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace vescale
