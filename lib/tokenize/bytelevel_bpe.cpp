#include "tokenize/bytelevel_bpe.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <queue>
#include <unordered_map>

#include "checkpoint/crc32c.h"
#include "core/error.h"
#include "core/input_file.h"
#include "tokenize/regex.h"
#include "tokenize/tokenizer_config.h"
#include "tokenize/unicode.h"

namespace vescale {

namespace {

using nlohmann::json;

/// GPT-2's pre-tokenizer, what ByteLevel with use_regex splits by.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

/// The end-of-text tokens looked for where tokenizer_config.json names none.
constexpr std::string_view kEndOfTextNames[] = {"<|endoftext|>", "<|end_of_text|>", "</s>",
                                                "<|im_end|>"};

/// GPT-2's bytes_to_unicode: the printable Latin-1 bytes stand for themselves, the others for
/// 256, 257, ... in byte order.
std::array<char32_t, 256> byte_characters() {
  std::array<char32_t, 256> chars{};
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    chars[static_cast<size_t>(b)] = printable ? static_cast<char32_t>(b) : next++;
  }
  return chars;
}

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool lstrip = false, rstrip = false, normalized = false;
};

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
  ByteLevelBpe(const std::string& path, const std::string& bytes) : path_(path) {
    identity_ = fmt::format("hf-bpe crc32c:{:08x}", crc32c(bytes.data(), bytes.size()));
    json j;
    try {
      j = json::parse(bytes);
    } catch (const json::exception& e) {
      fail(fmt::format("is not JSON ({})", e.what()));
    }
    if (!j.is_object())
      fail(fmt::format("is JSON but {} {}, not an object with a \"model\": not a tokenizer.json",
                       j.is_array() ? "an" : "a", j.type_name()));
    if (!j.contains("model")) fail("has no \"model\": not a tokenizer.json");
    std::optional<std::vector<int64_t>> from_template;
    try {
      load(j);
      from_template = template_start(j.contains("post_processor") ? j["post_processor"] : json());
    } catch (const json::out_of_range& e) {
      fail(fmt::format("lacks a key the format needs: {}", json_detail(e)));
    } catch (const json::exception& e) {
      fail(fmt::format("has a key of the wrong type: {}", json_detail(e)));
    }
    find_special_tokens(from_template);
  }

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
      VS_USER_CHECK(known(id), "tokenizer {}: id {} is not in its vocabulary (ids 0..{})", path_,
                    id, vocab_size() - 1);
      text += id_bytes_[static_cast<size_t>(id)];
    }
    return text;
  }

  int64_t vocab_size() const override { return static_cast<int64_t>(id_bytes_.size()); }
  std::optional<int64_t> end_of_text() const override { return end_of_text_; }
  std::vector<int64_t> document_start() const override { return start_; }
  std::string identity() const override { return identity_; }
  bool lossless() const override { return !add_prefix_space_ && !strip_tokens_; }

  size_t stable_prefix(std::string_view text) const override {
    if (strip_tokens_) return 0;
    // Added tokens that end before `safe` are final: none longer or earlier can reach past the
    // text. Past `safe` a token or a UTF-8 character may still be cut.
    const size_t margin = longest_added_ + 4;
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
  /// An id of the vocabulary or the added tokens.
  bool known(int64_t id) const {
    return id >= 0 && id < vocab_size() && has_id_[static_cast<size_t>(id)];
  }

  /// nlohmann's message without its "[json.exception.type_error.302] " prefix.
  static std::string json_detail(const json::exception& e) {
    const std::string what = e.what();
    const size_t end = what.rfind("] ", what.find(' ') + 1);
    return what.rfind("[json.exception.", 0) == 0 && end != std::string::npos ? what.substr(end + 2)
                                                                              : what;
  }

  /// The whole-number id `value` of `where`, in [0, 2^31).
  int64_t id_of(const json& value, const std::string& where) const {
    if (!value.is_number_integer())
      fail(fmt::format("{} is {}, not a whole-number id", where, value.dump()));
    const int64_t id = value.get<int64_t>();
    if (id < 0 || id >= (int64_t{1} << 31))
      fail(fmt::format("{} = {} is not an id in [0, 2^31)", where, id));
    return id;
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw UserError(fmt::format("tokenizer {}: {}", path_, what));
  }
  [[noreturn]] void unsupported(const std::string& what) const {
    fail(
        fmt::format("{} is not supported (this reads byte-level BPE tokenizer.json files: model "
                    "BPE, no normalizer, Split pre-tokenizers then ByteLevel, as GPT-2 and "
                    "Llama 3 ship)",
                    what));
  }

  void load(const json& j) {
    const json& model = j.at("model");
    const std::string type = model.value("type", std::string("BPE"));
    if (type != "BPE") unsupported(fmt::format("model.type \"{}\"", type));
    if (j.contains("normalizer") && !j["normalizer"].is_null()) {
      const json& n = j["normalizer"];
      const bool empty_sequence = n.value("type", "") == "Sequence" && n.contains("normalizers") &&
                                  n["normalizers"].empty();
      if (!empty_sequence) unsupported(fmt::format("normalizer \"{}\"", n.value("type", "?")));
    }
    load_pre_tokenizer(j.contains("pre_tokenizer") ? j["pre_tokenizer"] : json());
    if (j.contains("decoder") && !j["decoder"].is_null() &&
        j["decoder"].value("type", "") != "ByteLevel")
      unsupported(fmt::format("decoder \"{}\"", j["decoder"].value("type", "?")));
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
      if (model.contains(key) && !model[key].is_null() && !model[key].get<std::string>().empty())
        unsupported(fmt::format("model.{} \"{}\"", key, model[key].get<std::string>()));
    if (model.contains("dropout") && !model["dropout"].is_null() &&
        model["dropout"].get<double>() != 0.0)
      unsupported("model.dropout (BPE dropout is for training)");
    ignore_merges_ = model.value("ignore_merges", false);
    const json added = j.value("added_tokens", json::array());
    if (!added.is_array()) fail("added_tokens is not a list");
    load_vocab(model, added);
    load_merges(model.at("merges"));
    load_added_tokens(added);
  }

  /// The vocabulary: id -> the byte string it decodes to; each byte's id.
  void load_vocab(const json& model, const json& added) {
    const bool byte_fallback = model.value("byte_fallback", false);
    const json& vocab = model.at("vocab");
    if (!vocab.is_object()) fail("model.vocab is not an object of token: id");
    const std::array<char32_t, 256> byte_chars = byte_characters();
    std::array<int32_t, 0x200> char_byte;  // byte character -> byte
    char_byte.fill(-1);
    for (int b = 0; b < 256; ++b) {
      char_byte[static_cast<size_t>(byte_chars[static_cast<size_t>(b)])] = b;
      unicode::append_utf8(byte_chars[static_cast<size_t>(b)], &byte_text_[static_cast<size_t>(b)]);
    }
    int64_t max_id = -1;
    for (const auto& [token, id] : vocab.items())
      max_id = std::max(max_id, id_of(id, fmt::format("model.vocab[\"{}\"]", token)));
    for (const json& t : added)
      max_id = std::max(max_id, id_of(t.at("id"), "an added token's id"));
    if (max_id < 0) fail("model.vocab is empty");
    // Ids are dense in every real tokenizer; a stray large one would size the tables to it.
    const auto entries = static_cast<int64_t>(vocab.size() + added.size());
    if (max_id >= entries + 65536)
      fail(
          fmt::format("its ids reach {} for {} tokens: the ids of a tokenizer are 0..{} with "
                      "few gaps",
                      max_id, entries, entries - 1));
    id_bytes_.assign(static_cast<size_t>(max_id) + 1, std::string());
    has_id_.assign(id_bytes_.size(), false);
    vocab_.reserve(vocab.size());
    std::vector<const std::string*> token_of(id_bytes_.size(), nullptr);
    for (const auto& [token, value] : vocab.items()) {
      const int64_t id = value.get<int64_t>();
      if (token_of[static_cast<size_t>(id)] != nullptr)
        fail(fmt::format("model.vocab gives id {} to both \"{}\" and \"{}\"", id,
                         *token_of[static_cast<size_t>(id)], token));
      token_of[static_cast<size_t>(id)] = &token;
      vocab_.emplace(token, static_cast<int32_t>(id));
      has_id_[static_cast<size_t>(id)] = true;
      std::string& out = id_bytes_[static_cast<size_t>(id)];
      if (byte_fallback && token.size() == 6 && token.rfind("<0x", 0) == 0 && token[5] == '>' &&
          std::isxdigit(static_cast<unsigned char>(token[3])) &&
          std::isxdigit(static_cast<unsigned char>(token[4]))) {
        const auto fallback = static_cast<size_t>(std::stoi(token.substr(3, 2), nullptr, 16));
        out.push_back(static_cast<char>(fallback));
        byte_fallback_[fallback] = static_cast<int32_t>(id);
        continue;
      }
      for (const char32_t c : unicode::decode_utf8(token).points) {
        if (c < char_byte.size() && char_byte[c] >= 0)
          out.push_back(static_cast<char>(char_byte[c]));
        else
          unicode::append_utf8(c, &out);
      }
    }
    for (int b = 0; b < 256; ++b) {
      const auto it = vocab_.find(byte_text_[static_cast<size_t>(b)]);
      if (it != vocab_.end()) {
        byte_id_[static_cast<size_t>(b)] = it->second;
      } else if (byte_fallback_[static_cast<size_t>(b)] >= 0) {
        byte_id_[static_cast<size_t>(b)] = byte_fallback_[static_cast<size_t>(b)];
      } else {
        fail(
            fmt::format("model.vocab has no token for byte 0x{:02X} (\"{}\") and no <0x{:02X}> "
                        "byte fallback: not a byte-level BPE",
                        b, byte_text_[static_cast<size_t>(b)], b));
      }
    }
  }

  /// The ids a TemplateProcessing post-processor, alone or in a Sequence, puts before the text
  /// ($A) of a single text; none where there is no template (NOTE [Document start]).
  std::optional<std::vector<int64_t>> template_start(const json& p) const {
    if (!p.is_object()) return std::nullopt;
    const std::string type = p.value("type", "");
    if (type == "Sequence") {
      for (const json& q : p.value("processors", json::array()))
        if (auto start = template_start(q)) return start;
      return std::nullopt;
    }
    if (type != "TemplateProcessing") return std::nullopt;
    std::vector<int64_t> ids;
    const json special = p.value("special_tokens", json::object());
    for (const json& piece : p.at("single")) {
      if (!piece.contains("SpecialToken")) break;  // the text
      const std::string name = piece["SpecialToken"].at("id").get<std::string>();
      if (!special.contains(name))
        fail(fmt::format("post_processor's template names \"{}\", which its special_tokens lack",
                         name));
      for (const json& value : special[name].at("ids")) {
        const auto id = value.get<int64_t>();
        if (!known(id))
          fail(
              fmt::format("post_processor's special token \"{}\" has id {}, which is not "
                          "among its tokens",
                          name, id));
        ids.push_back(id);
      }
    }
    return ids;
  }

  void load_pre_tokenizer(const json& p) {
    std::vector<json> steps;
    if (p.is_null()) unsupported("a tokenizer.json without a pre_tokenizer");
    if (p.value("type", "") == "Sequence") {
      for (const json& s : p.at("pretokenizers"))
        steps.push_back(s);
    } else {
      steps.push_back(p);
    }
    for (size_t k = 0; k < steps.size(); ++k) {
      const json& s = steps[k];
      const std::string type = s.value("type", "?");
      const bool last = k + 1 == steps.size();
      if (type == "ByteLevel" && last) {
        add_prefix_space_ = s.value("add_prefix_space", false);
        if (s.value("use_regex", true)) splits_.emplace_back(kGpt2Pattern);
      } else if (type == "Split") {
        const std::string behavior = s.value("behavior", "?");
        if (behavior != "Isolated")
          unsupported(fmt::format("pre_tokenizer Split with behavior \"{}\"", behavior));
        if (s.value("invert", false)) unsupported("pre_tokenizer Split with invert");
        const json& pattern = s.at("pattern");
        std::string regex;
        if (pattern.contains("Regex")) {
          regex = pattern["Regex"].get<std::string>();
        } else {
          for (const char c : pattern.at("String").get<std::string>()) {
            if (!std::isalnum(static_cast<unsigned char>(c)) &&
                static_cast<unsigned char>(c) < 0x80)
              regex.push_back('\\');
            regex.push_back(c);
          }
        }
        try {
          splits_.emplace_back(regex);
        } catch (const UserError& e) {
          fail(fmt::format("pre_tokenizer Split: {}", e.what()));
        }
      } else {
        unsupported(fmt::format("pre_tokenizer \"{}\"{}", type,
                                type == "ByteLevel" ? " before another pre-tokenizer" : ""));
      }
    }
    if (steps.empty() || steps.back().value("type", "") != "ByteLevel")
      unsupported("a pre_tokenizer that does not end in ByteLevel");
    if (add_prefix_space_ && steps.size() > 1)  // the space would go to each Split piece
      unsupported("ByteLevel add_prefix_space after a Split pre-tokenizer");
  }

  void load_merges(const json& merges) {
    if (!merges.is_array())
      fail(fmt::format("model.merges is a {}, not a list of merges", merges.type_name()));
    merges_.reserve(merges.size());
    int32_t rank = 0;
    for (const json& m : merges) {
      std::string a, b;
      if (m.is_string()) {
        const std::string s = m.get<std::string>();
        const size_t space = s.find(' ');
        if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
          fail(fmt::format("model.merges[{}] \"{}\" is not two tokens with a space between", rank,
                           s));
        a = s.substr(0, space), b = s.substr(space + 1);
      } else if (m.is_array() && m.size() == 2) {
        a = m[0].get<std::string>(), b = m[1].get<std::string>();
      } else {
        fail(fmt::format("model.merges[{}] is neither \"a b\" nor [\"a\", \"b\"]", rank));
      }
      const auto ia = vocab_.find(a), ib = vocab_.find(b), ic = vocab_.find(a + b);
      if (ia == vocab_.end() || ib == vocab_.end() || ic == vocab_.end())
        fail(fmt::format("model.merges[{}] \"{} {}\": {} is not in model.vocab", rank, a, b,
                         ia == vocab_.end()   ? a
                         : ib == vocab_.end() ? b
                                              : a + b));
      // A pair listed twice takes its last rank, as Hugging Face's map of merges does.
      merges_.insert_or_assign(pair_key(ia->second, ib->second), Merge{rank, ic->second});
      ++rank;
    }
  }

  /// A token's text for a message: JSON-quoted, control and non-ASCII bytes escaped.
  static std::string shown(const std::string& text) {
    return json(text).dump(-1, ' ', /*ensure_ascii=*/true, json::error_handler_t::replace);
  }

  void load_added_tokens(const json& tokens) {
    for (size_t i = 0; i < tokens.size(); ++i) {
      const json& t = tokens[i];
      const std::string at = fmt::format("added_tokens[{}]", i);
      if (!t.is_object()) fail(fmt::format("{} is {}, not an object", at, t.type_name()));
      const auto flag = [&](const char* key, bool fallback) {
        if (!t.contains(key) || t[key].is_null()) return fallback;
        if (!t[key].is_boolean())
          fail(fmt::format("{}.{} is {}, not true or false", at, key, t[key].dump()));
        return t[key].get<bool>();
      };
      AddedToken a;
      if (!t.contains("content") || !t["content"].is_string())
        fail(fmt::format("{}.content is {}, not a string", at,
                         t.contains("content") ? t["content"].dump() : std::string("absent")));
      a.content = t["content"].get<std::string>();
      a.id = static_cast<int32_t>(t.at("id").get<int64_t>());  // id_of checked it
      // An added token may repeat a vocabulary entry (GPT-2's <|endoftext|>), not take its id.
      if (has_id_[static_cast<size_t>(a.id)] && id_bytes_[static_cast<size_t>(a.id)] != a.content)
        fail(fmt::format("added token {} takes id {}, which is already {}", shown(a.content), a.id,
                         shown(id_bytes_[static_cast<size_t>(a.id)])));
      a.lstrip = flag("lstrip", false);
      a.rstrip = flag("rstrip", false);
      a.normalized = flag("normalized", !flag("special", false));
      if (a.content.empty()) fail(fmt::format("added_tokens id {} has empty content", a.id));
      if (flag("single_word", false))
        unsupported(fmt::format("added token {} with single_word", shown(a.content)));
      strip_tokens_ = strip_tokens_ || a.lstrip || a.rstrip;
      longest_added_ = std::max(longest_added_, a.content.size());
      id_bytes_[static_cast<size_t>(a.id)] = a.content;
      has_id_[static_cast<size_t>(a.id)] = true;
      added_[a.normalized ? 1 : 0].push_back(std::move(a));
    }
    for (auto& pass : added_)  // longest first: the first that matches at a place is the longest
      std::stable_sort(pass.begin(), pass.end(), [](const AddedToken& x, const AddedToken& y) {
        return x.content.size() > y.content.size();
      });
  }

  /// The end-of-text token and the document start (NOTE [Document start]), from the template's
  /// (`from_template`, where there is one) and tokenizer_config.json where that file sits beside.
  void find_special_tokens(const std::optional<std::vector<int64_t>>& from_template) {
    const TokenizerConfig config = read_tokenizer_config(path_);
    const auto find = [&](std::string_view content) -> std::optional<int64_t> {
      for (const auto& pass : added_)
        for (const AddedToken& a : pass)
          if (a.content == content) return a.id;
      const auto it = vocab_.find(std::string(content));
      return it != vocab_.end() ? std::optional<int64_t>(it->second) : std::nullopt;
    };
    const auto id_of = [&](const std::string& content, const char* key) {
      const std::optional<int64_t> id = find(content);
      VS_USER_CHECK(id.has_value(),
                    "tokenizer {}: {} names {} \"{}\", which is not among its tokens", path_,
                    config.path, key, content);
      return *id;
    };
    if (from_template) {
      start_ = *from_template;
    } else if (config.add_bos_token) {
      VS_USER_CHECK(!config.bos_token.empty(),
                    "tokenizer {}: {} sets add_bos_token and names no bos_token", path_,
                    config.path);
      start_ = {id_of(config.bos_token, "bos_token")};
    }
    if (!config.eos_token.empty()) {
      end_of_text_ = id_of(config.eos_token, "eos_token");
      return;
    }
    for (const std::string_view name : kEndOfTextNames)
      if ((end_of_text_ = find(name))) return;
  }

  static uint64_t pair_key(int32_t a, int32_t b) {
    return static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32 | static_cast<uint32_t>(b);
  }

  /// The text cut into added tokens and what lies between (NOTE [Byte-level BPE]).
  std::vector<Span> spans(std::string_view text) const {
    std::vector<Span> out{{0, text.size(), -1}};
    for (const auto& pass : added_) {
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

  /// Calls piece(begin, end) for each pre-token of points[begin, end), split by splits_[level:].
  void pre_tokenize(const char32_t* points, size_t begin, size_t end, size_t level,
                    const std::function<void(size_t, size_t)>& piece) const {
    if (level == splits_.size()) {
      piece(begin, end);
      return;
    }
    size_t pos = begin;
    while (pos < end) {
      const auto m = splits_[level].find(points, pos, end);
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
    if (!add_prefix_space_ || text.empty() || text[0] == ' ') return text;
    *storage = " " + std::string(text);
    return *storage;
  }

  /// The ids of text between added tokens.
  void encode_text(std::string_view text, std::vector<int64_t>* ids) const {
    if (text.empty()) return;
    VS_USER_CHECK(text.size() < (size_t{1} << 31) - 1,
                  "tokenizer {}: {} bytes without an added token is more than 2 GiB at once; "
                  "encode it in parts (data prepare does)",
                  path_, text.size());
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
    if (splits_.empty()) return 0;  // the whole text is one piece
    std::string spaced;
    const std::string_view t = with_prefix_space(text, &spaced);
    const size_t shift = t.size() - text.size();
    const unicode::DecodedText d = unicode::decode_utf8(t);
    size_t pos = 0, consumed = 0, stable = 0;
    while (pos < d.points.size()) {
      Regex::Probe probe;
      const auto m = splits_[0].find(d.points.data(), pos, d.points.size(), &probe);
      if (!m || probe.looked_at_end) break;
      consumed = std::max(consumed, probe.consumed_end);
      pos = m->end;
      const size_t at = d.offsets[pos];
      // A later part starts a text of its own: with add_prefix_space it must start with ' '.
      const bool spaced_next = !add_prefix_space_ || (at < t.size() && t[at] == ' ');
      if (consumed <= pos && at > shift && spaced_next) stable = at - shift;
    }
    return stable;
  }

  /// The ids of one pre-token's bytes: merges by rank, the lowest first, leftmost on ties.
  void encode_piece(std::string_view bytes, std::vector<int64_t>* ids) const {
    if (bytes.size() == 1) {
      ids->push_back(byte_id_[static_cast<unsigned char>(bytes[0])]);
      return;
    }
    if (ignore_merges_) {
      std::string word;
      for (const char b : bytes)
        word += byte_text_[static_cast<unsigned char>(b)];
      const auto it = vocab_.find(word);
      if (it != vocab_.end()) {
        ids->push_back(it->second);
        return;
      }
    }
    struct Symbol {
      int32_t id, prev, next;
    };
    std::vector<Symbol> symbols(bytes.size());
    for (size_t i = 0; i < bytes.size(); ++i)
      symbols[i] = {byte_id_[static_cast<unsigned char>(bytes[i])], static_cast<int32_t>(i) - 1,
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
      const auto it = merges_.find(pair_key(a, b));
      if (it != merges_.end()) queue.push({it->second.rank, left, a, b, it->second.id});
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

  struct Merge {
    int32_t rank, id;
  };

  std::string path_, identity_;
  std::array<std::string, 256> byte_text_;  ///< each byte's character, UTF-8
  std::array<int32_t, 256> byte_id_{};
  std::array<int32_t, 256> byte_fallback_ = [] {
    std::array<int32_t, 256> a{};
    a.fill(-1);
    return a;
  }();
  std::unordered_map<std::string, int32_t> vocab_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::vector<std::string> id_bytes_;  ///< what each id decodes to
  std::vector<bool> has_id_;
  std::vector<AddedToken> added_[2];  ///< [0]: matched before normalization, [1]: after
  std::vector<Regex> splits_;
  bool add_prefix_space_ = false, ignore_merges_ = false, strip_tokens_ = false;
  size_t longest_added_ = 0;
  std::optional<int64_t> end_of_text_;
  std::vector<int64_t> start_;  ///< NOTE [Document start]
};

}  // namespace

std::unique_ptr<Tokenizer> open_bytelevel_bpe(const std::string& path) {
  return std::make_unique<ByteLevelBpe>(path, read_input_file(path, "tokenizer", int64_t{1} << 30));
}

}  // namespace vescale
