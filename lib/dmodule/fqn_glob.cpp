#include "dmodule/fqn_glob.h"

#include <algorithm>
#include <vector>

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

}  // namespace vescale
