// The pre-tokenizer regex's parser (NOTE [Pre-tokenizer regex]): pattern -> RegexNode tree and
// character classes, with Oniguruma's reading of \p{..}, \s, \d and \w.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <memory>

#include "core/error.h"
#include "tokenize/regex_syntax.h"
#include "tokenize/unicode.h"

namespace vescale::detail {
namespace {

using unicode::Category;

constexpr uint32_t bit(Category c) {
  return uint32_t{1} << c;
}
constexpr uint32_t kLetters = bit(unicode::kLu) | bit(unicode::kLl) | bit(unicode::kLt) |
                              bit(unicode::kLm) | bit(unicode::kLo);
constexpr uint32_t kMarks = bit(unicode::kMn) | bit(unicode::kMc) | bit(unicode::kMe);
constexpr uint32_t kNumbers = bit(unicode::kNd) | bit(unicode::kNl) | bit(unicode::kNo);
constexpr uint32_t kPunctuation = bit(unicode::kPc) | bit(unicode::kPd) | bit(unicode::kPs) |
                                  bit(unicode::kPe) | bit(unicode::kPi) | bit(unicode::kPf) |
                                  bit(unicode::kPo);
constexpr uint32_t kSymbols =
    bit(unicode::kSm) | bit(unicode::kSc) | bit(unicode::kSk) | bit(unicode::kSo);
constexpr uint32_t kSeparators = bit(unicode::kZs) | bit(unicode::kZl) | bit(unicode::kZp);
constexpr uint32_t kOthers = bit(unicode::kCc) | bit(unicode::kCf) | bit(unicode::kCs) |
                             bit(unicode::kCo) | bit(unicode::kCn);
constexpr uint32_t kWord = kLetters | kMarks | kNumbers | bit(unicode::kPc);

/// The categories \p{name} names, or 0.
uint32_t category_mask(std::string_view name) {
  static constexpr std::string_view kShort[] = {
      "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe",
      "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn"};
  for (int c = 0; c < unicode::kCategoryCount; ++c)
    if (name == kShort[c]) return uint32_t{1} << c;
  struct Named {
    std::string_view a, b;
    uint32_t mask;
  };
  static constexpr Named kGroups[] = {{"L", "Letter", kLetters},
                                      {"M", "Mark", kMarks},
                                      {"N", "Number", kNumbers},
                                      {"P", "Punctuation", kPunctuation},
                                      {"S", "Symbol", kSymbols},
                                      {"Z", "Separator", kSeparators},
                                      {"C", "Other", kOthers},
                                      {"Nd", "Decimal_Number", bit(unicode::kNd)},
                                      {"Lu", "Uppercase_Letter", bit(unicode::kLu)},
                                      {"Ll", "Lowercase_Letter", bit(unicode::kLl)}};
  for (const Named& n : kGroups)
    if (name == n.a || name == n.b) return n.mask;
  return 0;
}

class Parser {
 public:
  Parser(std::string_view pattern, std::vector<Regex::CharSet>* sets)
      : pattern_(pattern), sets_(sets) {
    const unicode::DecodedText d = unicode::decode_utf8(pattern);
    p_ = d.points;
  }

  std::unique_ptr<RegexNode> parse() {
    auto node = alternation();
    if (i_ < p_.size()) fail("an unmatched ')'");
    return node;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw UserError(
        fmt::format("regex \"{}\": {} at character {} (taken: alternation, groups, "
                    "(?i:...), lookahead, classes, \\p{{..}}, quantifiers)",
                    pattern_, what, i_));
  }
  bool more() const { return i_ < p_.size(); }
  char32_t peek() const { return p_[i_]; }
  bool eat(char32_t c) {
    if (more() && peek() == c) {
      ++i_;
      return true;
    }
    return false;
  }

  std::unique_ptr<RegexNode> alternation() {
    auto first = concat();
    if (!more() || peek() != '|') return first;
    auto alt = std::make_unique<RegexNode>();
    alt->kind = RegexNode::kAlternation;
    alt->children.push_back(std::move(first));
    while (eat('|'))
      alt->children.push_back(concat());
    return alt;
  }

  std::unique_ptr<RegexNode> concat() {
    auto seq = std::make_unique<RegexNode>();
    seq->kind = RegexNode::kConcat;
    while (more() && peek() != '|' && peek() != ')') {
      if (peek() == '(' && i_ + 2 < p_.size() && p_[i_ + 1] == '?' && p_[i_ + 2] == 'i' &&
          i_ + 3 < p_.size() && p_[i_ + 3] == ')') {
        i_ += 4;  // (?i): the rest of the enclosing group ignores case
        fold_ = true;
        continue;
      }
      seq->children.push_back(repeat());
    }
    return seq;
  }

  std::unique_ptr<RegexNode> repeat() {
    auto atom_node = atom();
    while (more()) {
      int min = 0, max = 0;
      if (eat('*')) {
        min = 0, max = -1;
      } else if (eat('+')) {
        min = 1, max = -1;
      } else if (eat('?')) {
        min = 0, max = 1;
      } else if (peek() == '{' && counted(&min, &max)) {
      } else {
        break;
      }
      if (atom_node->kind == RegexNode::kLookahead) fail("a quantified lookahead");
      if (max < 0 && atom_node->kind != RegexNode::kSet && nullable(*atom_node))
        fail("a repeated group that can match nothing");
      auto rep = std::make_unique<RegexNode>();
      rep->kind = RegexNode::kRepeat;
      rep->min = min, rep->max = max;
      if (eat('?')) rep->greedy = false;
      if (more() && peek() == '+') fail("a possessive quantifier");
      rep->children.push_back(std::move(atom_node));
      atom_node = std::move(rep);
    }
    return atom_node;
  }

  /// Whether `n` can match the empty string (a loop over it could go round without moving).
  static bool nullable(const RegexNode& n) {
    switch (n.kind) {
      case RegexNode::kEmpty:
      case RegexNode::kLookahead:
        return true;
      case RegexNode::kSet:
        return false;
      case RegexNode::kRepeat:
        return n.min == 0 || nullable(*n.children[0]);
      case RegexNode::kConcat:
        for (const auto& c : n.children)
          if (!nullable(*c)) return false;
        return true;
      case RegexNode::kAlternation:
        for (const auto& c : n.children)
          if (nullable(*c)) return true;
        return false;
    }
    return true;
  }

  /// {n}, {n,}, {n,m} at i_; false (and i_ kept) where '{' is a literal.
  bool counted(int* min, int* max) {
    size_t j = i_ + 1;
    const auto number = [&](int* out) {
      const size_t start = j;
      int v = 0;
      while (j < p_.size() && p_[j] >= '0' && p_[j] <= '9' && v < 100000)
        v = v * 10 + static_cast<int>(p_[j++] - '0');
      *out = v;
      return j > start;
    };
    if (j < p_.size() && p_[j] == ',') {  // {,n}: Oniguruma's {0,n}
      ++j;
      *min = 0;
      if (!number(max) || j >= p_.size() || p_[j] != '}') return false;
      i_ = j + 1;
      return true;
    }
    if (!number(min)) return false;
    *max = *min;
    if (j < p_.size() && p_[j] == ',') {
      ++j;
      if (!number(max)) *max = -1;
    }
    if (j >= p_.size() || p_[j] != '}') return false;
    if (*max >= 0 && *max < *min) fail("a quantifier {n,m} with m < n");
    i_ = j + 1;
    return true;
  }

  std::unique_ptr<RegexNode> atom() {
    const char32_t c = peek();
    if (c == '(') return group();
    if (c == '[') return set_node(char_class());
    if (c == '.') {
      ++i_;
      Regex::CharSet s;
      s.any_but_newline = true;
      return set_node(std::move(s));
    }
    if (c == '\\') {
      ++i_;
      return set_node(escape(false));
    }
    if (c == '^' || c == '$') fail(fmt::format("an anchor '{}'", static_cast<char>(c)));
    if (c == '*' || c == '+' || c == '?') fail("a quantifier with nothing before it");
    ++i_;
    return set_node(literal(c));
  }

  std::unique_ptr<RegexNode> group() {
    ++i_;  // (
    bool saved_fold = fold_;
    std::unique_ptr<RegexNode> node;
    if (eat('?')) {
      if (eat(':')) {
        node = alternation();
      } else if (more() && (peek() == '=' || peek() == '!')) {
        const bool negative = p_[i_++] == '!';
        node = std::make_unique<RegexNode>();
        node->kind = RegexNode::kLookahead;
        node->negative = negative;
        node->children.push_back(alternation());
      } else if (more() && peek() == 'i' && i_ + 1 < p_.size() && p_[i_ + 1] == ':') {
        i_ += 2;
        fold_ = true;
        node = alternation();
      } else if (more() && peek() == '<') {
        fail("a lookbehind or named group");
      } else {
        fail("a group flag other than (?:, (?i:, (?=, (?!");
      }
    } else {
      node = alternation();  // a capturing group: captures are not needed
    }
    if (!eat(')')) fail("a '(' without its ')'");
    fold_ = saved_fold;
    return node;
  }

  std::unique_ptr<RegexNode> set_node(Regex::CharSet s) {
    s.fold_case = s.fold_case || fold_;
    sets_->push_back(std::move(s));
    auto node = std::make_unique<RegexNode>();
    node->kind = RegexNode::kSet;
    node->set = static_cast<int>(sets_->size()) - 1;
    return node;
  }

  static Regex::CharSet literal(char32_t c) {
    Regex::CharSet s;
    s.ranges.emplace_back(c, c);
    return s;
  }

  /// The escape after '\' at i_, as a set (in a class or not).
  Regex::CharSet escape(bool in_class) {
    if (!more()) fail("a '\\' at the end");
    const char32_t c = p_[i_++];
    Regex::CharSet s;
    switch (c) {
      case 's':
        s.space = true;
        return s;
      case 'S':
        s.not_space = true;
        return s;
      case 'd':
        s.categories = bit(unicode::kNd);
        return s;
      case 'D':
        s.not_categories.push_back(bit(unicode::kNd));
        return s;
      case 'w':
        s.categories = kWord;
        return s;
      case 'W':
        s.not_categories.push_back(kWord);
        return s;
      case 'p':
      case 'P': {
        std::string name;
        if (eat('{')) {
          while (more() && peek() != '}')
            name.push_back(static_cast<char>(p_[i_++]));
          if (!eat('}')) fail("a \\p{ without its }");
        } else if (more()) {
          name.push_back(static_cast<char>(p_[i_++]));
        }
        const bool negated = !name.empty() && name[0] == '^';
        if (negated) name.erase(0, 1);
        const uint32_t mask = category_mask(name);
        if (mask == 0) fail(fmt::format("an unknown property \\p{{{}}}", name));
        if ((c == 'P') != negated)
          s.not_categories.push_back(mask);
        else
          s.categories = mask;
        return s;
      }
      case 't':
        return literal('\t');
      case 'n':
        return literal('\n');
      case 'r':
        return literal('\r');
      case 'f':
        return literal('\f');
      case 'v':
        return literal('\v');
      case 'a':
        return literal('\a');
      case 'e':
        return literal(0x1B);
      case 'x':
      case 'u': {
        const bool braced = eat('{');
        const size_t digits = braced ? 8 : (c == 'x' ? 2 : 4);
        char32_t v = 0;
        size_t n = 0;
        while (more() && n < digits && peek() < 0x80 && std::isxdigit(static_cast<int>(peek()))) {
          const char32_t h = p_[i_++];
          v = v * 16 + static_cast<char32_t>(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
          ++n;
        }
        if (n == 0 || (braced && !eat('}'))) fail("a bad \\x or \\u escape");
        return literal(v);
      }
      default:
        break;
    }
    if (c < 0x80 && std::isalnum(static_cast<int>(c)))
      fail(fmt::format("the escape \\{}{}", static_cast<char>(c), in_class ? " in a class" : ""));
    return literal(c);  // \. \( \' and the like
  }

  Regex::CharSet char_class() {
    ++i_;  // [
    Regex::CharSet s;
    s.negated = eat('^');
    bool first = true;
    while (more() && (peek() != ']' || first)) {
      first = false;
      if (peek() == '[') fail("a nested class or [:name:]");
      Regex::CharSet item;
      char32_t lo = 0;
      bool single = false;
      if (eat('\\')) {
        item = escape(true);
        if (item.ranges.size() == 1 && item.categories == 0 && item.not_categories.empty() &&
            !item.space && !item.not_space) {
          lo = item.ranges[0].first;
          single = true;
        }
      } else {
        lo = p_[i_++];
        single = true;
      }
      if (single && i_ + 1 < p_.size() && peek() == '-' && p_[i_ + 1] != ']') {
        ++i_;
        char32_t hi = p_[i_++];
        if (hi == '\\') {
          Regex::CharSet e = escape(true);
          if (e.ranges.size() != 1) fail("a range ending in a class");
          hi = e.ranges[0].first;
        }
        if (hi < lo) fail("a range out of order");
        s.ranges.emplace_back(lo, hi);
      } else if (single) {
        s.ranges.emplace_back(lo, lo);
      } else {
        s.categories |= item.categories;
        s.not_categories.insert(s.not_categories.end(), item.not_categories.begin(),
                                item.not_categories.end());
        s.space = s.space || item.space;
        s.not_space = s.not_space || item.not_space;
      }
    }
    if (!eat(']')) fail("a '[' without its ']'");
    return s;
  }

  std::string_view pattern_;
  std::vector<Regex::CharSet>* sets_;
  std::vector<char32_t> p_;
  size_t i_ = 0;
  bool fold_ = false;
};

}  // namespace

std::unique_ptr<RegexNode> parse_regex(std::string_view pattern,
                                       std::vector<Regex::CharSet>* sets) {
  return Parser(pattern, sets).parse();
}

}  // namespace vescale::detail
