#include "dmodule/fqn_glob.h"

#include <algorithm>

namespace vescale {
namespace {

std::vector<std::string> segments(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t dot = s.find('.', start);
    out.push_back(s.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return out;
}

bool match(const std::vector<std::string>& p, size_t i, const std::vector<std::string>& f,
           size_t j) {
  if (i == p.size()) return j == f.size();
  if (p[i] == "**") {
    for (size_t k = j; k <= f.size(); ++k) {
      if (match(p, i + 1, f, k)) return true;
    }
    return false;
  }
  if (j == f.size()) return false;
  return (p[i] == "*" || p[i] == f[j]) && match(p, i + 1, f, j + 1);
}

}  // namespace

bool fqn_matches(const std::string& pattern, const std::string& fqn) {
  return match(segments(pattern), 0, segments(fqn), 0);
}

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

}  // namespace vescale
