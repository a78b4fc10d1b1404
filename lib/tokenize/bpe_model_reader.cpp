// The reader of a byte-level BPE tokenizer.json (NOTE [Byte-level BPE]): its vocabulary, merges,
// added tokens, pre-tokenizer and special tokens into a BpeModel, refusing in one line naming the
// key whatever the encoder does not do.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <nlohmann/json.hpp>

#include "checkpoint/crc32c.h"
#include "core/error.h"
#include "tokenize/bpe_model.h"
#include "tokenize/tokenizer_config.h"
#include "tokenize/unicode.h"

namespace vescale::detail {
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

class BpeModelReader {
 public:
  BpeModelReader(const std::string& path, const std::string& bytes, BpeModel* model) : m_(*model) {
    m_.path = path;
    m_.identity = fmt::format("hf-bpe crc32c:{:08x}", crc32c(bytes.data(), bytes.size()));
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

 private:
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
    throw UserError(fmt::format("tokenizer {}: {}", m_.path, what));
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
    m_.ignore_merges = model.value("ignore_merges", false);
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
      unicode::append_utf8(byte_chars[static_cast<size_t>(b)],
                           &m_.byte_text[static_cast<size_t>(b)]);
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
    m_.id_bytes.assign(static_cast<size_t>(max_id) + 1, std::string());
    m_.has_id.assign(m_.id_bytes.size(), false);
    m_.vocab.reserve(vocab.size());
    std::vector<const std::string*> token_of(m_.id_bytes.size(), nullptr);
    for (const auto& [token, value] : vocab.items()) {
      const int64_t id = value.get<int64_t>();
      if (token_of[static_cast<size_t>(id)] != nullptr)
        fail(fmt::format("model.vocab gives id {} to both \"{}\" and \"{}\"", id,
                         *token_of[static_cast<size_t>(id)], token));
      token_of[static_cast<size_t>(id)] = &token;
      m_.vocab.emplace(token, static_cast<int32_t>(id));
      m_.has_id[static_cast<size_t>(id)] = true;
      std::string& out = m_.id_bytes[static_cast<size_t>(id)];
      if (byte_fallback && token.size() == 6 && token.rfind("<0x", 0) == 0 && token[5] == '>' &&
          std::isxdigit(static_cast<unsigned char>(token[3])) &&
          std::isxdigit(static_cast<unsigned char>(token[4]))) {
        const auto fallback = static_cast<size_t>(std::stoi(token.substr(3, 2), nullptr, 16));
        out.push_back(static_cast<char>(fallback));
        m_.byte_fallback[fallback] = static_cast<int32_t>(id);
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
      const auto it = m_.vocab.find(m_.byte_text[static_cast<size_t>(b)]);
      if (it != m_.vocab.end()) {
        m_.byte_id[static_cast<size_t>(b)] = it->second;
      } else if (m_.byte_fallback[static_cast<size_t>(b)] >= 0) {
        m_.byte_id[static_cast<size_t>(b)] = m_.byte_fallback[static_cast<size_t>(b)];
      } else {
        fail(
            fmt::format("model.vocab has no token for byte 0x{:02X} (\"{}\") and no <0x{:02X}> "
                        "byte fallback: not a byte-level BPE",
                        b, m_.byte_text[static_cast<size_t>(b)], b));
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
        if (!m_.known(id))
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
        m_.add_prefix_space = s.value("add_prefix_space", false);
        if (s.value("use_regex", true)) m_.splits.emplace_back(kGpt2Pattern);
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
          m_.splits.emplace_back(regex);
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
    if (m_.add_prefix_space && steps.size() > 1)  // the space would go to each Split piece
      unsupported("ByteLevel add_prefix_space after a Split pre-tokenizer");
  }

  void load_merges(const json& merges) {
    if (!merges.is_array())
      fail(fmt::format("model.merges is a {}, not a list of merges", merges.type_name()));
    m_.merges.reserve(merges.size());
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
      const auto ia = m_.vocab.find(a), ib = m_.vocab.find(b), ic = m_.vocab.find(a + b);
      if (ia == m_.vocab.end() || ib == m_.vocab.end() || ic == m_.vocab.end())
        fail(fmt::format("model.merges[{}] \"{} {}\": {} is not in model.vocab", rank, a, b,
                         ia == m_.vocab.end()   ? a
                         : ib == m_.vocab.end() ? b
                                                : a + b));
      // A pair listed twice takes its last rank, as Hugging Face's map of merges does.
      m_.merges.insert_or_assign(BpeModel::pair_key(ia->second, ib->second),
                                 BpeModel::Merge{rank, ic->second});
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
      if (m_.has_id[static_cast<size_t>(a.id)] &&
          m_.id_bytes[static_cast<size_t>(a.id)] != a.content)
        fail(fmt::format("added token {} takes id {}, which is already {}", shown(a.content), a.id,
                         shown(m_.id_bytes[static_cast<size_t>(a.id)])));
      a.lstrip = flag("lstrip", false);
      a.rstrip = flag("rstrip", false);
      a.normalized = flag("normalized", !flag("special", false));
      if (a.content.empty()) fail(fmt::format("added_tokens id {} has empty content", a.id));
      if (flag("single_word", false))
        unsupported(fmt::format("added token {} with single_word", shown(a.content)));
      m_.strip_tokens = m_.strip_tokens || a.lstrip || a.rstrip;
      m_.longest_added = std::max(m_.longest_added, a.content.size());
      m_.id_bytes[static_cast<size_t>(a.id)] = a.content;
      m_.has_id[static_cast<size_t>(a.id)] = true;
      m_.added[a.normalized ? 1 : 0].push_back(std::move(a));
    }
    for (auto& pass : m_.added)  // longest first: the first that matches at a place is the longest
      std::stable_sort(pass.begin(), pass.end(), [](const AddedToken& x, const AddedToken& y) {
        return x.content.size() > y.content.size();
      });
  }

  /// The end-of-text token and the document start (NOTE [Document start]), from the template's
  /// (`from_template`, where there is one) and tokenizer_config.json where that file sits beside.
  void find_special_tokens(const std::optional<std::vector<int64_t>>& from_template) {
    const TokenizerConfig config = read_tokenizer_config(m_.path);
    const auto find = [&](std::string_view content) -> std::optional<int64_t> {
      for (const auto& pass : m_.added)
        for (const AddedToken& a : pass)
          if (a.content == content) return a.id;
      const auto it = m_.vocab.find(std::string(content));
      return it != m_.vocab.end() ? std::optional<int64_t>(it->second) : std::nullopt;
    };
    const auto id_of = [&](const std::string& content, const char* key) {
      const std::optional<int64_t> id = find(content);
      VS_USER_CHECK(id.has_value(),
                    "tokenizer {}: {} names {} \"{}\", which is not among its tokens", m_.path,
                    config.path, key, content);
      return *id;
    };
    if (from_template) {
      m_.start = *from_template;
    } else if (config.add_bos_token) {
      VS_USER_CHECK(!config.bos_token.empty(),
                    "tokenizer {}: {} sets add_bos_token and names no bos_token", m_.path,
                    config.path);
      m_.start = {id_of(config.bos_token, "bos_token")};
    }
    if (!config.eos_token.empty()) {
      m_.end_of_text = id_of(config.eos_token, "eos_token");
      return;
    }
    for (const std::string_view name : kEndOfTextNames)
      if ((m_.end_of_text = find(name))) return;
  }

  BpeModel& m_;
};

}  // namespace

BpeModel read_bpe_model(const std::string& path, const std::string& bytes) {
  BpeModel model;
  BpeModelReader(path, bytes, &model);
  return model;
}

}  // namespace vescale::detail
