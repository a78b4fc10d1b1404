// The two halves of compiling a pre-tokenizer regex (NOTE [Pre-tokenizer regex]): the parser turns
// the pattern into a tree and its character classes, the compiler turns the tree into the
// backtracking program Regex::find runs.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "tokenize/regex.h"

namespace vescale::detail {

/// A parsed pattern: a tree of sets (indices into the Regex's CharSets), concatenations,
/// alternatives, repeats and lookaheads.
struct RegexNode {
  enum Kind { kEmpty, kSet, kConcat, kAlternation, kRepeat, kLookahead } kind = kEmpty;
  int set = 0;
  std::vector<std::unique_ptr<RegexNode>> children;
  int min = 0, max = 0;
  bool greedy = true, negative = false;
};

/// Parses a UTF-8 pattern, appending its character classes to `sets`; throws UserError naming the
/// construct it does not take and where.
std::unique_ptr<RegexNode> parse_regex(std::string_view pattern, std::vector<Regex::CharSet>* sets);

/// Appends the program of `tree` to `program` (without the final kMatch).
void compile_regex(const RegexNode& tree, std::vector<Regex::Inst>* program);

}  // namespace vescale::detail
