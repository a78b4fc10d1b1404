#include "tokenize/sentencepiece_tokenizer.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cmath>
#include <filesystem>

#include "checkpoint/crc32c.h"
#include "core/error.h"
#include "core/input_file.h"
#include "tokenize/sentencepiece_api.h"
#include "tokenize/tokenizer_config.h"

namespace vescale {

namespace {

constexpr const char* kPlugin = "libvescale_sentencepiece.so";

/// Where the plugin is: $VESCALE_SENTENCEPIECE_PLUGIN, else beside the executable.
std::string plugin_path() {
  if (const char* env = std::getenv("VESCALE_SENTENCEPIECE_PLUGIN")) return env;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? kPlugin : (exe.parent_path() / kPlugin).string();
}

/// NOTE [SentencePiece plugin]: the table, loaded once; null with `error` set when the plugin
/// is missing (a build without libsentencepiece-dev) or not ours.
const SentencePieceApi* plugin(std::string* error) {
  static std::string load_error;
  static const SentencePieceApi* api = []() -> const SentencePieceApi* {
    const std::string path = plugin_path();
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (handle == nullptr) {
      const char* why = ::dlerror();
      load_error = fmt::format(
          "this vescale-train has no SentencePiece plugin ({}); build it with "
          "libsentencepiece-dev installed (scripts/setup.sh)",
          why ? why : path);
      return nullptr;
    }
    using Entry = const SentencePieceApi* (*)();
    const auto entry = reinterpret_cast<Entry>(::dlsym(handle, "vescale_sentencepiece_api"));
    const SentencePieceApi* table = entry ? entry() : nullptr;
    if (table == nullptr || table->version != SentencePieceApi::kVersion) {
      load_error = fmt::format("{} is not this vescale-train's SentencePiece plugin", path);
      return nullptr;
    }
    return table;
  }();
  if (api == nullptr) *error = load_error;
  return api;
}

/// Text a lossless tokenizer gives back byte for byte: leading, repeated and trailing
/// whitespace, a newline, a byte that is not UTF-8, CJK and an emoji.
constexpr std::string_view kLosslessProbe =
    "  two  spaces\n\ttab \xff\xfe caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80 ";

class SentencePieceTokenizer final : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(const std::string& path)
      : path_(path), api_(require_sentencepiece_plugin(fmt::format("tokenizer {}", path))) {
    const std::string bytes = read_input_file(path, "tokenizer", int64_t{1} << 30);
    std::string error;
    processor_ = api_->load(bytes, &error);
    VS_USER_CHECK(processor_ != nullptr,
                  "tokenizer {}: not a SentencePiece model ({}); a tokenizer is \"bytes\" or a "
                  "SentencePiece model file such as tokenizer.model",
                  path, error);
    identity_ = fmt::format("sentencepiece crc32c:{:08x}", crc32c(bytes.data(), bytes.size()));
    try {  // a constructor that throws runs no destructor
      const std::string probe(kLosslessProbe);
      lossless_ = decode(encode(probe)) == probe;
      splits_at_spaces_ = pieces_split_at_spaces();
      find_document_start();
    } catch (...) {
      api_->release(processor_);
      throw;
    }
  }
  ~SentencePieceTokenizer() override { api_->release(processor_); }
  SentencePieceTokenizer(const SentencePieceTokenizer&) = delete;
  SentencePieceTokenizer& operator=(const SentencePieceTokenizer&) = delete;

  std::vector<int64_t> encode(std::string_view text) const override {
    std::vector<int> ids;
    std::string error;
    VS_USER_CHECK(api_->encode(processor_, text, &ids, &error), "tokenizer {}: cannot encode: {}",
                  path_, error);
    return {ids.begin(), ids.end()};
  }

  std::string decode(const std::vector<int64_t>& ids) const override {
    std::vector<int> pieces;
    pieces.reserve(ids.size());
    for (int64_t id : ids) {
      VS_USER_CHECK(id >= 0 && id < vocab_size(),
                    "tokenizer {}: id {} is outside its vocabulary of {}", path_, id, vocab_size());
      pieces.push_back(static_cast<int>(id));
    }
    std::string text, error;
    VS_USER_CHECK(api_->decode(processor_, pieces, &text, &error),
                  "tokenizer {}: cannot decode: {}", path_, error);
    return text;
  }

  int64_t vocab_size() const override { return api_->piece_size(processor_); }
  std::optional<int64_t> end_of_text() const override {
    const int eos = api_->eos_id(processor_);
    return eos >= 0 ? std::optional<int64_t>(eos) : std::nullopt;
  }
  std::vector<int64_t> document_start() const override { return start_; }
  std::string identity() const override { return identity_; }
  bool lossless() const override { return lossless_; }

  /// Up to the last space that follows a character other than a space (NOTE [SentencePiece
  /// streaming]); 0 for models that do not split there.
  /// data prepare of 3 MB without a space on a 300-piece BPE model: 829 MB of peak RSS
  /// against 171 MB for 30 KB, ~220 bytes a byte (2026-11-28, this machine).
  double encode_memory_per_byte() const override { return 220; }

  size_t stable_prefix(std::string_view text) const override {
    if (!splits_at_spaces_) return 0;
    for (size_t p = text.size(); p-- > 1;)
      if (text[p] == ' ' && text[p - 1] != ' ') return p;
    return 0;
  }

 private:
  /// NOTE [Document start]: Llama 2's tokenizer_config.json (its bos_token is "<s>" unless
  /// said).
  void find_document_start() {
    const TokenizerConfig config = read_tokenizer_config(path_);
    if (!config.add_bos_token) return;
    const std::string bos = config.bos_token.empty() ? "<s>" : config.bos_token;
    for (int id = 0; id < vocab_size() && start_.empty(); ++id)
      if (api_->piece(processor_, id) == bos) start_ = {id};
    VS_USER_CHECK(!start_.empty(),
                  "tokenizer {}: {} sets add_bos_token, and bos_token \"{}\" is no piece of the "
                  "model",
                  path_, config.path, bos);
  }

  // NOTE [SentencePiece streaming]
  // A BPE model encodes a text cut before a space (one that follows another character) as the
  // two parts apart when no piece can hold that space after another character: every piece has
  // U+2581 (a space) only in a run from its start (split_by_whitespace,
  // allow_whitespace_only_pieces), no dummy prefix is added to a text's start, and normalization
  // keeps the text as it is (identity, spaces kept: what `tokenizer train` writes). Then no merge
  // joins the parts, and the merges on each side are those of the whole. The model is checked for
  // all of it as it loads: the pieces, then cuts of probe texts encoded apart and whole. A
  // unigram model is not cut: its Viterbi sums float scores, and a different sum before the cut
  // could round a near-tie after it the other way. Such models encode a file at a time.
  bool pieces_split_at_spaces() const {
    static constexpr std::string_view kSpace = "\xe2\x96\x81";
    for (int id = 0; id < vocab_size(); ++id) {
      const float s = api_->score(processor_, id);
      if (s != std::floor(s)) return false;  // a unigram model's log-probabilities
      const std::string p = api_->piece(processor_, id);
      size_t run = 0;  // the leading run of spaces
      while (p.compare(run, kSpace.size(), kSpace) == 0)
        run += kSpace.size();
      if (p.find(kSpace, run) != std::string::npos) return false;
      if (p.find_first_not_of(' ') != std::string::npos &&
          p.find(' ', p.find_first_not_of(' ')) != std::string::npos)
        return false;  // escape_whitespaces off: a raw space after another character
    }
    // Spaces, and characters a normalizer other than identity changes: a ligature, a full-width
    // letter, a no-break space, a combining accent. Every cut gives the ids of the whole.
    for (const std::string probe :
         {"  two  spaces\n\ttab \xef\xac\x81 \xef\xbc\xa1 \xc2\xa0 e\xcc\x81 ", "a b  c\td \n e x",
          "hello world, it's 12 o'clock"}) {
      const std::vector<int64_t> whole = encode(probe);
      if (decode(whole) != probe) return false;
      for (size_t p = 1; p < probe.size(); ++p) {
        if (probe[p] != ' ' || probe[p - 1] == ' ') continue;
        std::vector<int64_t> parts = encode(std::string_view(probe).substr(0, p));
        const std::vector<int64_t> rest = encode(std::string_view(probe).substr(p));
        parts.insert(parts.end(), rest.begin(), rest.end());
        if (parts != whole) return false;
      }
    }
    return true;
  }

  std::string path_;
  const SentencePieceApi* api_;
  void* processor_ = nullptr;
  std::string identity_;
  bool lossless_ = false;
  bool splits_at_spaces_ = false;
  std::vector<int64_t> start_;  ///< NOTE [Document start]
};

}  // namespace

const SentencePieceApi* require_sentencepiece_plugin(const std::string& what) {
  std::string error;
  const SentencePieceApi* api = plugin(&error);
  VS_USER_CHECK(api != nullptr, "{}: {}", what, error);
  return api;
}

std::unique_ptr<Tokenizer> open_sentencepiece(const std::string& path) {
  return std::make_unique<SentencePieceTokenizer>(path);
}

}  // namespace vescale
