// The pre-tokenizer regex's compiler (NOTE [Pre-tokenizer regex]): RegexNode tree -> the
// instructions of a backtracking program; a repeated character class becomes one loop (kRun).
#include <vector>

#include "tokenize/regex_syntax.h"

namespace vescale::detail {
namespace {

class Compiler {
 public:
  explicit Compiler(std::vector<Regex::Inst>* program) : program_(program) {}

  void emit(const RegexNode& n) {
    switch (n.kind) {
      case RegexNode::kEmpty:
        return;
      case RegexNode::kSet:
        add({Regex::Op::kChar, n.set});
        return;
      case RegexNode::kConcat:
        for (const auto& c : n.children)
          emit(*c);
        return;
      case RegexNode::kAlternation: {
        // Split(a, next) ... a: Jump(end) ... : the alternatives in order.
        std::vector<int> jumps;
        for (size_t k = 0; k < n.children.size(); ++k) {
          const bool last = k + 1 == n.children.size();
          const int split = last ? -1 : add({Regex::Op::kSplit});
          if (split >= 0) at(split).x = here();
          emit(*n.children[k]);
          if (!last) {
            jumps.push_back(add({Regex::Op::kJump}));
            at(split).y = here();
          }
        }
        for (const int j : jumps)
          at(j).x = here();
        return;
      }
      case RegexNode::kLookahead: {
        const int look = add({Regex::Op::kLookahead});
        at(look).negative = n.negative;
        emit(*n.children[0]);
        add({Regex::Op::kMatch});
        at(look).x = here();
        return;
      }
      case RegexNode::kRepeat:
        repeat(n);
        return;
    }
  }

 private:
  int add(Regex::Inst inst) {
    program_->push_back(inst);
    return here() - 1;
  }
  int here() const { return static_cast<int>(program_->size()); }
  Regex::Inst& at(int pc) { return (*program_)[static_cast<size_t>(pc)]; }

  void repeat(const RegexNode& n) {
    const RegexNode& body = *n.children[0];
    if (body.kind == RegexNode::kSet) {  // a loop, not a recursion (NOTE [Pre-tokenizer regex])
      Regex::Inst run{Regex::Op::kRun, body.set};
      run.min = n.min, run.max = n.max, run.greedy = n.greedy;
      add(run);
      return;
    }
    for (int k = 0; k < n.min; ++k)
      emit(body);
    if (n.max < 0) {  // L: Split(body, out); body; Jump L
      const int split = add({Regex::Op::kSplit});
      emit(body);
      at(add({Regex::Op::kJump})).x = split;
      branch(split, split + 1, here(), n.greedy);
      return;
    }
    std::vector<int> splits;
    for (int k = n.min; k < n.max; ++k) {
      splits.push_back(add({Regex::Op::kSplit}));
      emit(body);
    }
    for (const int s : splits)
      branch(s, s + 1, here(), n.greedy);
  }

  void branch(int split, int body, int out, bool greedy) {
    at(split).x = greedy ? body : out;
    at(split).y = greedy ? out : body;
  }

  std::vector<Regex::Inst>* program_;
};

}  // namespace

void compile_regex(const RegexNode& tree, std::vector<Regex::Inst>* program) {
  Compiler(program).emit(tree);
}

}  // namespace vescale::detail
