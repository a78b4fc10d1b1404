#include "core/suggest.h"

#include <fmt/format.h>

#include <algorithm>

namespace vescale {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::vector<std::string> near_matches(const std::string& word,
                                      const std::vector<std::string>& candidates, size_t count) {
  std::vector<std::pair<size_t, std::string>> scored;
  const size_t limit = std::max<size_t>(2, word.size() / 3);
  for (const auto& c : candidates) {
    const size_t d = edit_distance(word, c);
    if (d <= limit) scored.emplace_back(d, c);
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (const auto& [d, c] : scored) {
    if (out.size() == count) break;
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  }
  return out;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  const std::vector<std::string> near = near_matches(word, candidates, 1);
  return near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near[0]);
}

}  // namespace vescale
