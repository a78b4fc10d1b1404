// The byte-level BPE tokenizer (NOTE [Byte-level BPE]): added tokens, pre-tokenizing splits and
// merges by rank over a BpeModel that bpe_model_reader.cpp read from a tokenizer.json.
#include "tokenize/bytelevel_bpe.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <queue>

#include "core/error.h"
#include "core/input_file.h"
#include "tokenize/bpe_model.h"
#include "tokenize/regex.h"
#include "tokenize/unicode.h"

namespace vescale {
namespace {

using detail::AddedToken;
using detail::BpeModel;

/// A span of the text: an added token's match (id >= 0) or text to pre-tokenize (id < 0).
struct Span {
  size_t begin, end;
  int32_t id;
};

/// The code point before text[i] (UTF-8), and its length; a stray byte reads as itself.
char32_t point_before(std::string_view text, size_t i, size_t* length) {
  for (size_t n = 1; n <= 4 && n <= i; ++n) {
    const unicode::DecodedText d = unicode::decode_utf8(text.substr(i - n, n));
    if (d.points.size() == 1 && (n == 1 || d.points[0] < unicode::kStrayByteBase ||
                                 d.points[0] >= unicode::kStrayByteBase + 256)) {
      *length = n;
      return d.points[0];
    }
  }
  *length = 1;
  return unicode::kStrayByteBase + static_cast<unsigned char>(text[i - 1]);
}

char32_t point_at(std::string_view text, size_t i, size_t* length) {
  const unicode::DecodedText d =
      unicode::decode_utf8(text.substr(i, std::min<size_t>(4, text.size() - i)));
  *length = d.offsets[1];
  return d.points[0];
}

class ByteLevelBpe final : public Tokenizer {
 public:
  explicit ByteLevelBpe(BpeModel model) : m_(std::move(model)) {}

  std::vector<int64_t> encode(std::string_view text) const override {
    std::vector<int64_t> ids;
    ids.reserve(text.size() / 3);
    for (const Span& s : spans(text)) {
      if (s.id >= 0)
        ids.push_back(s.id);
      else
        encode_text(text.substr(s.begin, s.end - s.begin), &ids);
    }
    return ids;
  }

  std::string decode(const std::vector<int64_t>& ids) const override {
    std::string text;
    for (const int64_t id : ids) {
      VS_USER_CHECK(m_.known(id), "tokenizer {}: id {} is not in its vocabulary (ids 0..{})",
                    m_.path, id, vocab_size() - 1);
      text += m_.id_bytes[static_cast<size_t>(id)];
    }
    return text;
  }

  int64_t vocab_size() const override { return static_cast<int64_t>(m_.id_bytes.size()); }
  std::optional<int64_t> end_of_text() const override { return m_.end_of_text; }
  std::vector<int64_t> document_start() const override { return m_.start; }
  std::string identity() const override { return m_.identity; }
  bool lossless() const override { return !m_.add_prefix_space && !m_.strip_tokens; }

  size_t stable_prefix(std::string_view text) const override {
    if (m_.strip_tokens) return 0;
    // Added tokens that end before `safe` are final: none longer or earlier can reach past the
    // text. Past `safe` a token or a UTF-8 character may still be cut.
    const size_t margin = m_.longest_added + 4;
    if (text.size() <= margin) return 0;
    size_t safe = text.size() - margin;
    // Not inside a UTF-8 character: its cut-off bytes would read as stray bytes, which stop a
    // run of letters that the whole character continues.
    while (safe > 0 && (static_cast<unsigned char>(text[safe]) & 0xC0) == 0x80)
      --safe;
    size_t begin = 0, end = safe;
    for (const Span& s : spans(text)) {
      if (s.id < 0) continue;
      if (s.end <= safe) {
        begin = s.end;
      } else {
        end = std::min(end, s.begin);
        break;
      }
    }
    if (end <= begin) return begin;
    return begin + stable_in_text(text.substr(begin, end - begin));
  }

 private:
 private:
  /// The text cut into added tokens and what lies between (NOTE [Byte-level BPE]).
  std::vector<Span> spans(std::string_view text) const {
    std::vector<Span> out{{0, text.size(), -1}};
    for (const auto& pass : m_.added) {
      if (pass.empty()) continue;
      std::vector<Span> next;
      for (const Span& s : out) {
        if (s.id >= 0) {
          next.push_back(s);
          continue;
        }
        split_added(text, s.begin, s.end, pass, &next);
      }
      out = std::move(next);
    }
    return out;
  }

  void split_added(std::string_view text, size_t begin, size_t end,
                   const std::vector<AddedToken>& tokens, std::vector<Span>* out) const {
    size_t from = begin;  // the start of the text not yet placed
    for (size_t i = begin; i < end; ++i) {
      const AddedToken* hit = nullptr;
      for (const AddedToken& t : tokens)
        if (t.content[0] == text[i] && t.content.size() <= end - i &&
            text.compare(i, t.content.size(), t.content) == 0) {
          hit = &t;
          break;
        }
      if (!hit) continue;
      size_t start = i, stop = i + hit->content.size(), n = 0;
      if (hit->lstrip)
        while (start > from && unicode::white_space(point_before(text, start, &n)))
          start -= n;
      if (hit->rstrip)
        while (stop < end && unicode::white_space(point_at(text, stop, &n)))
          stop += n;
      if (start > from) out->push_back({from, start, -1});
      out->push_back({start, stop, hit->id});
      from = stop;
      i = stop - 1;
    }
    if (from < end) out->push_back({from, end, -1});
  }

  /// Calls piece(begin, end) for each pre-token of points[begin, end), split by m_.splits[level:].
  void pre_tokenize(const char32_t* points, size_t begin, size_t end, size_t level,
                    const std::function<void(size_t, size_t)>& piece) const {
    if (level == m_.splits.size()) {
      piece(begin, end);
      return;
    }
    size_t pos = begin;
    while (pos < end) {
      const auto m = m_.splits[level].find(points, pos, end);
      if (!m) {
        pre_tokenize(points, pos, end, level + 1, piece);
        return;
      }
      if (m->begin > pos) pre_tokenize(points, pos, m->begin, level + 1, piece);
      pre_tokenize(points, m->begin, m->end, level + 1, piece);
      pos = m->end;
    }
  }

  /// `text` as ByteLevel's add_prefix_space has it: with a space in front where it starts with
  /// none (held in *storage).
  std::string_view with_prefix_space(std::string_view text, std::string* storage) const {
    if (!m_.add_prefix_space || text.empty() || text[0] == ' ') return text;
    *storage = " " + std::string(text);
    return *storage;
  }

  /// The ids of text between added tokens.
  void encode_text(std::string_view text, std::vector<int64_t>* ids) const {
    if (text.empty()) return;
    VS_USER_CHECK(text.size() < (size_t{1} << 31) - 1,
                  "tokenizer {}: {} bytes without an added token is more than 2 GiB at once; "
                  "encode it in parts (data prepare does)",
                  m_.path, text.size());
    std::string spaced;
    text = with_prefix_space(text, &spaced);
    const unicode::DecodedText d = unicode::decode_utf8(text);
    pre_tokenize(d.points.data(), 0, d.points.size(), 0, [&](size_t b, size_t e) {
      encode_piece(text.substr(d.offsets[b], d.offsets[e] - d.offsets[b]), ids);
    });
  }

  /// How much of `text` (between added tokens) encodes alone whatever follows: the end of the
  /// last pre-token whose finding read nothing at or past it, nor the text's end.
  size_t stable_in_text(std::string_view text) const {
    if (m_.splits.empty()) return 0;  // the whole text is one piece
    std::string spaced;
    const std::string_view t = with_prefix_space(text, &spaced);
    const size_t shift = t.size() - text.size();
    const unicode::DecodedText d = unicode::decode_utf8(t);
    size_t pos = 0, consumed = 0, stable = 0;
    while (pos < d.points.size()) {
      Regex::Probe probe;
      const auto m = m_.splits[0].find(d.points.data(), pos, d.points.size(), &probe);
      if (!m || probe.looked_at_end) break;
      consumed = std::max(consumed, probe.consumed_end);
      pos = m->end;
      const size_t at = d.offsets[pos];
      // A later part starts a text of its own: with add_prefix_space it must start with ' '.
      const bool spaced_next = !m_.add_prefix_space || (at < t.size() && t[at] == ' ');
      if (consumed <= pos && at > shift && spaced_next) stable = at - shift;
    }
    return stable;
  }

  /// The ids of one pre-token's bytes: merges by rank, the lowest first, leftmost on ties.
  void encode_piece(std::string_view bytes, std::vector<int64_t>* ids) const {
    if (bytes.size() == 1) {
      ids->push_back(m_.byte_id[static_cast<unsigned char>(bytes[0])]);
      return;
    }
    if (m_.ignore_merges) {
      std::string word;
      for (const char b : bytes)
        word += m_.byte_text[static_cast<unsigned char>(b)];
      const auto it = m_.vocab.find(word);
      if (it != m_.vocab.end()) {
        ids->push_back(it->second);
        return;
      }
    }
    struct Symbol {
      int32_t id, prev, next;
    };
    std::vector<Symbol> symbols(bytes.size());
    for (size_t i = 0; i < bytes.size(); ++i)
      symbols[i] = {m_.byte_id[static_cast<unsigned char>(bytes[i])], static_cast<int32_t>(i) - 1,
                    i + 1 < bytes.size() ? static_cast<int32_t>(i) + 1 : -1};
    struct Candidate {
      int32_t rank, left, left_id, right_id, merged_id;
      bool operator>(const Candidate& o) const {
        return rank != o.rank ? rank > o.rank : left > o.left;
      }
    };
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
    const auto consider = [&](int32_t left) {
      if (left < 0) return;
      const int32_t right = symbols[static_cast<size_t>(left)].next;
      if (right < 0) return;
      const int32_t a = symbols[static_cast<size_t>(left)].id;
      const int32_t b = symbols[static_cast<size_t>(right)].id;
      const auto it = m_.merges.find(BpeModel::pair_key(a, b));
      if (it != m_.merges.end()) queue.push({it->second.rank, left, a, b, it->second.id});
    };
    for (size_t i = 0; i + 1 < bytes.size(); ++i)
      consider(static_cast<int32_t>(i));
    while (!queue.empty()) {
      const Candidate c = queue.top();
      queue.pop();
      Symbol& left = symbols[static_cast<size_t>(c.left)];
      if (left.id != c.left_id || left.next < 0) continue;  // merged away since
      Symbol& right = symbols[static_cast<size_t>(left.next)];
      if (right.id != c.right_id) continue;
      left.id = c.merged_id;
      right.id = -1;
      left.next = right.next;
      if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = c.left;
      consider(left.prev);
      consider(c.left);
    }
    for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next)
      ids->push_back(symbols[static_cast<size_t>(i)].id);
  }

  BpeModel m_;
};

}  // namespace

std::unique_ptr<Tokenizer> open_bytelevel_bpe(const std::string& path) {
  return std::make_unique<ByteLevelBpe>(
      detail::read_bpe_model(path, read_input_file(path, "tokenizer", int64_t{1} << 30)));
}

}  // namespace vescale
