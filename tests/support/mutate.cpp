#include "support/mutate.h"

#include <algorithm>

namespace vescale::testing {
namespace {

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = text.find('\n', start);
    if (end == std::string::npos) {
      if (start < text.size()) lines.push_back(text.substr(start));
      break;
    }
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& line : lines)
    out += line + "\n";
  return out;
}

}  // namespace

const std::vector<std::string>& hostile_values() {
  static const std::vector<std::string> values = {"nan",
                                                  "inf",
                                                  "-inf",
                                                  "-1",
                                                  "0",
                                                  "-0.0",
                                                  "1e308",
                                                  "1e-320",
                                                  "9223372036854775807",
                                                  "9223372036854775808",
                                                  "-9223372036854775808",
                                                  "65536",
                                                  "2147483648",
                                                  "1000000000",
                                                  "\"\"",
                                                  "\"" + std::string(5000, 'x') + "\"",
                                                  "true",
                                                  "[1, 2]",
                                                  "[]",
                                                  "{ a = 1 }",
                                                  "\"S(99)\"",
                                                  "\"S(-5)\"",
                                                  "\"S(9223372036854775808)\"",
                                                  "\"P(min)\"",
                                                  "\"R\"",
                                                  "\"S(0)\"",
                                                  "[\"S(0)\", \"S(0)\"]",
                                                  "[[\"R\"]]",
                                                  "null",
                                                  "\"/dev/zero\"",
                                                  "\"../../etc/passwd\"",
                                                  "0.5",
                                                  "1",
                                                  "2",
                                                  "3",
                                                  "4",
                                                  "\"gpt\"",
                                                  "\"mlp\"",
                                                  "\"zbv\"",
                                                  "\"float64\"",
                                                  "\"tokens\"",
                                                  "\"merged\""};
  return values;
}

const std::vector<std::string>& hostile_json_values() {
  static const std::vector<std::string> values = {
      "-1",
      "0",
      "1",
      "2",
      "0.5",
      "-0.0",
      "1e308",
      "1e400",
      "-1e400",
      "1e-320",
      "9223372036854775807",
      "9223372036854775808",
      "18446744073709551616",
      "-9223372036854775809",
      "2147483648",
      "1000000000",
      "65536",
      "true",
      "null",
      "\"\"",
      "\"x\"",
      "\"" + std::string(5000, 'x') + "\"",
      "{}",
      "[]",
      "[1, 2]",
      "[-1]",
      "[1e18]",
      "[0, 9223372036854775807]",
      "{\"a\": 1}",
      "\"\\u0000\"",
      std::string(20000, '[') + std::string(20000, ']')};
  return values;
}

std::string Mutator::json(const std::string& text, const std::vector<std::string>& hostile) {
  std::string out = text;
  const size_t edits = 1 + below(3);
  for (size_t i = 0; i < edits; ++i) {
    if (below(2) == 0) {
      out = one_edit(out, hostile);
      continue;
    }
    std::vector<std::string> lines = split_lines(out);
    std::vector<size_t> values;  // lines of a "key": value
    for (size_t l = 0; l < lines.size(); ++l)
      if (lines[l].find("\": ") != std::string::npos) values.push_back(l);
    if (values.empty()) continue;
    std::string& line = lines[values[below(values.size())]];
    const bool comma = !line.empty() && line.back() == ',';
    line =
        line.substr(0, line.find("\": ") + 3) + hostile[below(hostile.size())] + (comma ? "," : "");
    out = join_lines(lines);
  }
  return out;
}

std::string Mutator::text(const std::string& text, const std::vector<std::string>& hostile) {
  std::string out = text;
  const size_t edits = 1 + below(3);
  for (size_t i = 0; i < edits; ++i)
    out = one_edit(out, hostile);
  return out;
}

std::string Mutator::one_edit(const std::string& text, const std::vector<std::string>& hostile) {
  std::vector<std::string> lines = split_lines(text);
  if (lines.empty()) lines.push_back("");
  const size_t at = below(lines.size());
  const std::string& value = hostile[below(hostile.size())];
  switch (below(11)) {
    case 8:
    case 9:
    case 10:
      return replace_quoted(text, value);
    case 0:
    case 1: {  // a value replaced: after '=' or ':', else appended
      std::string& line = lines[at];
      size_t cut = line.find('=');
      if (cut == std::string::npos) cut = line.find(':');
      line = cut == std::string::npos ? line + value : line.substr(0, cut + 1) + " " + value;
      break;
    }
    case 2:  // a line dropped
      lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(at));
      break;
    case 3:  // a line doubled (a repeated key)
      lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(at), lines[at]);
      break;
    case 4:  // a line cut short
      lines[at] = lines[at].substr(0, below(lines[at].size() + 1));
      break;
    case 5: {  // a byte flipped
      std::string& line = lines[at];
      if (!line.empty()) line[below(line.size())] = static_cast<char>(below(256));
      break;
    }
    case 6:  // raw bytes
      lines[at].insert(below(lines[at].size() + 1), std::string("\0\xff\xfe\x80", 4));
      break;
    default:  // a known key of the line above with a hostile value
      lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(at),
                   lines[at].substr(
                       0, lines[at].find('=') == std::string::npos ? 0 : lines[at].find('=') + 1) +
                       value);
      break;
  }
  return join_lines(lines);
}

std::string Mutator::replace_quoted(const std::string& text, const std::string& value) {
  std::vector<size_t> quotes;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '"') quotes.push_back(i);
  }
  if (quotes.size() < 2) return text;
  const size_t pair = below(quotes.size() / 2);
  const size_t open = quotes[2 * pair], close = quotes[2 * pair + 1];
  return text.substr(0, open) + value + text.substr(close + 1);
}

size_t Mutator::flip_byte(std::string& bytes, size_t begin, size_t end) {
  const size_t at = begin + below(std::max<size_t>(1, end - begin));
  const char old = bytes[at];
  char now = old;
  while (now == old)
    now = static_cast<char>(below(256));
  bytes[at] = now;
  return at;
}

}  // namespace vescale::testing
