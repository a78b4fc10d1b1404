// Regex: its character classes and the backtracking matcher over code points (NOTE
// [Pre-tokenizer regex]); the pattern is parsed and compiled by regex_parser.cpp and
// regex_compiler.cpp.
#include "tokenize/regex.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "tokenize/regex_syntax.h"
#include "tokenize/unicode.h"

namespace vescale {
namespace {

bool in_ranges(const std::vector<std::pair<char32_t, char32_t>>& ranges, char32_t c) {
  for (const auto& [lo, hi] : ranges)
    if (c >= lo && c <= hi) return true;
  return false;
}

}  // namespace

bool Regex::CharSet::contains(char32_t c) const {
  if (c < 128) return (ascii[c >> 6] >> (c & 63)) & 1;
  return contains_slow(c);
}

bool Regex::CharSet::contains_slow(char32_t c) const {
  bool in = in_ranges(ranges, c) || (fold_case && in_ranges(ranges, unicode::fold(c)));
  if (!in && fold_case) {  // c is the folding of a range member: 'ſ' folds to 's'
    for (const auto& [lo, hi] : ranges)
      for (char32_t r = lo; r <= hi && r - lo < 256 && !in; ++r)
        in = unicode::fold(r) == unicode::fold(c);
  }
  if (!in && any_but_newline) in = c != '\n';
  if (!in && (categories || !not_categories.empty())) {
    const uint32_t b = uint32_t{1} << unicode::category(c);
    in = (categories & b) != 0;
    for (const uint32_t m : not_categories)
      in = in || (m & b) == 0;
  }
  if (!in && space) in = unicode::white_space(c);
  if (!in && not_space) in = !unicode::white_space(c);
  return in != negated;
}

Regex::Regex(std::string_view pattern) {
  detail::compile_regex(*detail::parse_regex(pattern, &sets_), &program_);
  program_.push_back({Op::kMatch});
  for (CharSet& s : sets_)
    for (char32_t c = 0; c < 128; ++c)
      if (s.contains_slow(c)) s.ascii[c >> 6] |= uint64_t{1} << (c & 63);
}

/// One find(): the text, and whether an attempt read past its end.
struct RegexMatcher {
  /// Each kRun, kSplit and lookahead nests a call: a repeated group nests one a round. A frame is
  /// ~100 bytes: 40,000 stay within 4 MB of a thread's 8 MB stack.
  static constexpr int kMaxDepth = 40000;
  const Regex& re;
  const char32_t* points;
  size_t to;
  Regex::Probe probe;
  int depth = 0;

  /// Runs the program from pc at pos; on a match sets *end and says true.
  bool run(int pc, size_t pos, size_t* end) {
    if (++depth > kMaxDepth)
      throw UserError(fmt::format(
          "regex: a repeated group went round more than {} times on this text", kMaxDepth));
    struct Leave {
      int& d;
      ~Leave() { --d; }
    } leave{depth};
    for (;;) {
      const Regex::Inst& inst = re.program_[static_cast<size_t>(pc)];
      switch (inst.op) {
        case Regex::Op::kChar:
          if (pos >= to) {
            probe.looked_at_end = true;
            return false;
          }
          if (!re.sets_[static_cast<size_t>(inst.set)].contains(points[pos])) return false;
          probe.consumed_end = std::max(probe.consumed_end, ++pos);
          ++pc;
          break;
        case Regex::Op::kRun: {
          const Regex::CharSet& set = re.sets_[static_cast<size_t>(inst.set)];
          const size_t limit = inst.max < 0 ? to - pos : std::min<size_t>(inst.max, to - pos);
          size_t n = 0;
          while (n < limit && set.contains(points[pos + n]))
            ++n;
          if (n == to - pos && (inst.max < 0 || n < static_cast<size_t>(inst.max)))
            probe.looked_at_end = true;
          probe.consumed_end = std::max(probe.consumed_end, pos + n);
          if (n < static_cast<size_t>(inst.min)) return false;
          if (inst.greedy) {
            for (size_t k = n + 1; k-- > static_cast<size_t>(inst.min);)
              if (run(pc + 1, pos + k, end)) return true;
          } else {
            for (size_t k = static_cast<size_t>(inst.min); k <= n; ++k)
              if (run(pc + 1, pos + k, end)) return true;
          }
          return false;
        }
        case Regex::Op::kSplit:
          if (run(inst.x, pos, end)) return true;
          pc = inst.y;
          break;
        case Regex::Op::kJump:
          pc = inst.x;
          break;
        case Regex::Op::kLookahead: {
          size_t ignored = 0;
          if (run(pc + 1, pos, &ignored) == inst.negative) return false;
          pc = inst.x;
          break;
        }
        case Regex::Op::kMatch:
          *end = pos;
          return true;
      }
    }
  }
};

std::optional<Regex::Match> Regex::find(const char32_t* points, size_t from, size_t to,
                                        Probe* probe) const {
  RegexMatcher m{*this, points, to, {}, 0};
  std::optional<Match> found;
  for (size_t start = from; start < to && !found; ++start) {
    size_t end = 0;
    if (m.run(0, start, &end) && end > start) found = Match{start, end};
  }
  if (probe) *probe = m.probe;
  return found;
}

}  // namespace vescale
