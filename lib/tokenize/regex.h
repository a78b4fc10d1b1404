// The regular expressions that split text before byte-level BPE (NOTE [Byte-level BPE]): GPT-2's,
// Llama 3's, and the like, as Oniguruma (which Hugging Face tokenizers use) reads them.
//
// NOTE [Pre-tokenizer regex]
// The pre-tokenizer patterns use \p{L}-style categories, (?i:...) and a negative lookahead, which
// neither std::regex nor RE2 has, so this is a small backtracking matcher of its own over code
// points: alternation, groups ((...), (?:...), (?i:...), (?i)), lookahead ((?=...), (?!...)),
// classes ([...] with ranges, \p{..}, \P{..}, \s, \d, \w and their negations), '.', and the
// quantifiers ?, *, +, {n}, {n,}, {n,m}, greedy or lazy. Anything else (anchors, backreferences,
// lookbehind, possessive quantifiers) is refused by name. Alternatives are tried in order and the
// first that matches wins, as in Oniguruma, PCRE and Python. \s is White_Space, \d is Nd, \w is
// L, M, N and Pc, as in Oniguruma; {,n} is {0,n}. A quantified character class runs as a loop,
// not a recursion, so a run of a million letters costs no stack; a repeated group nests a call a
// round (at most 40,000 rounds, a one-line error past them), and one that can match nothing is
// refused.
//
// find() also says how far it read (Probe), which lets a long file be encoded a piece at a time
// (Tokenizer::stable_prefix).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace vescale {

class Regex {
 public:
  /// Compiles a UTF-8 pattern; throws UserError naming the construct it does not take.
  explicit Regex(std::string_view pattern);

  struct Match {
    size_t begin, end;
  };
  /// What a find() read of the text: where it did not look at the end, its answer holds whatever
  /// follows; where it consumed nothing at or past a position b, the text cut at b gives the
  /// same answer.
  struct Probe {
    bool looked_at_end = false;  ///< an attempt read, or wanted to read, points[to]
    size_t consumed_end = 0;     ///< one past the last code point any attempt matched
  };
  /// The leftmost non-empty match in points[from, to).
  std::optional<Match> find(const char32_t* points, size_t from, size_t to,
                            Probe* probe = nullptr) const;

  /// One class of code points (a [...] class, an escape like \s, or one literal).
  struct CharSet {
    std::vector<std::pair<char32_t, char32_t>> ranges;
    uint32_t categories = 0;                ///< bit per unicode::Category
    std::vector<uint32_t> not_categories;   ///< \P{..}, \D, \W: matches outside each mask
    bool space = false, not_space = false;  ///< \s, \S
    bool negated = false, fold_case = false;
    bool any_but_newline = false;  ///< '.'
    uint64_t ascii[2] = {0, 0};    ///< membership of code points < 128, precomputed
    bool contains(char32_t c) const;
    bool contains_slow(char32_t c) const;
  };

  enum class Op : uint8_t { kChar, kRun, kSplit, kJump, kLookahead, kMatch };
  struct Inst {
    Op op;
    int set = 0;            ///< kChar, kRun
    int x = 0, y = 0;       ///< kSplit: preferred, other; kJump: x; kLookahead: continue at x
    int min = 0, max = 0;   ///< kRun; max < 0: unbounded
    bool greedy = true;     ///< kRun
    bool negative = false;  ///< kLookahead
  };

 private:
  friend struct RegexMatcher;  // one find()'s state: a Regex is shared by threads
  std::vector<CharSet> sets_;
  std::vector<Inst> program_;
};

}  // namespace vescale
