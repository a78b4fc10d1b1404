#include "data/prepare_tokens.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <signal.h>
#include <unistd.h>
#include <algorithm>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "checkpoint/folder_lock.h"
#include "config/memory_estimate.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/safe_files.h"
#include "core/units.h"
#include "data/byte_source.h"
#include "data/chat_template.h"
#include "data/json_lines.h"
#include "tokenize/tokenizer.h"
#include "tokenize/unicode.h"

namespace vescale {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

/// The bytes read at a time from a file; a piece of text is encoded once the tokenizer can cut
/// it (Tokenizer::stable_prefix), so a file of any size streams through.
constexpr size_t kReadBlock = size_t{1} << 20;

/// A piece of one file, encoded on its own: a text file's stretch, or JSON lines.
struct Chunk {
  size_t seq = 0;
  std::string text;
  bool first = false;  ///< the file's start: the document start precedes (NOTE [Document start])
  bool last = false;   ///< the file's end: the end-of-text token follows
  bool json_lines = false;  ///< whole lines of a JSON-lines file, each a document
  size_t file = 0;
  int64_t first_line = 0;  ///< the number of its first line
  std::string bad_line;    ///< a line the reader skipped after the text (a truncated stream's)
};

/// A chunk's tokens, with (under --sft) their mask and where its examples start.
struct Encoded {
  std::vector<int64_t> tokens;
  std::vector<uint8_t> mask;
  std::vector<int64_t> starts;  ///< offsets in `tokens`
  int64_t documents = 0, bad_lines = 0, trained = 0;
  std::string first_bad;
  size_t bytes = 0;
  /// A bad line's error (no --skip-bad-lines): the writer throws it when it reaches this chunk,
  /// so the error named is the first bad line in the files' order whatever the threads did.
  std::exception_ptr error;
};

/// The files a prepare writes a split into: its tokens and, under --sft, mask and starts.
struct SplitFiles {
  std::ofstream tokens, mask, starts;
};

/// Appends `values` to `out` as T.
template <typename T, typename V>
void write_values(std::ofstream& out, const std::vector<V>& values) {
  std::vector<T> narrow(values.begin(), values.end());
  out.write(reinterpret_cast<const char*>(narrow.data()),
            static_cast<std::streamsize>(narrow.size() * sizeof(T)));
}

/// Moves the last `count` tokens (of `width` bytes) of `from` into the new file `to`, and cuts
/// them off `from`.
void split_tail(const fs::path& from, const fs::path& to, int64_t count, size_t width) {
  const auto total = static_cast<int64_t>(fs::file_size(from));
  const int64_t keep = total - count * static_cast<int64_t>(width);
  std::ifstream in(from, std::ios::binary);
  std::ofstream out(to, std::ios::binary | std::ios::trunc);
  in.seekg(keep);
  std::vector<char> buffer(std::size_t{1} << 22);
  for (int64_t left = total - keep; left > 0;) {
    const auto chunk =
        static_cast<std::streamsize>(std::min<int64_t>(left, static_cast<int64_t>(buffer.size())));
    in.read(buffer.data(), chunk);
    out.write(buffer.data(), chunk);
    left -= chunk;
  }
  out.close();
  VS_USER_CHECK(in.good() && out.good(), "data prepare: writing {} failed: {}", to.string(),
                std::strerror(errno));
  fs::resize_file(from, static_cast<uintmax_t>(keep));
}

/// A stretch of `bytes` from `where` in file `f` ("offset 12", "line 3") that the tokenizer cannot
/// cut is encoded at once: refused when that would take more than half of this machine's memory.
void check_stretch_fits(const Tokenizer& tokenizer, const PrepareOptions& o, size_t f,
                        const std::string& where, size_t bytes) {
  const double need = tokenizer.encode_memory_per_byte() * static_cast<double>(bytes);
  const double memory = physical_memory_bytes();
  VS_USER_CHECK(
      memory <= 0 || need <= memory / 2,
      "data prepare: {} has {} from {} with no place where tokenizer {} can cut (no space "
      "between words, or a model that encodes a file whole), which it would encode at once in "
      "about {} ({:.0f} bytes a byte) of this machine's {}; break the text up, e.g. into lines "
      "of words",
      o.files[f], format_bytes(static_cast<double>(bytes)), where, o.tokenizer, format_bytes(need),
      tokenizer.encode_memory_per_byte(), format_bytes(memory));
}

/// The streaming encode of NOTE [Token files]: a reader thread cuts the files into chunks where
/// the tokenizer can cut (JSON lines: between lines), `threads` workers encode them, and the
/// calling thread writes them in order, at most 2 x threads chunks in memory at once.
class StreamingEncoder {
 public:
  StreamingEncoder(const PrepareOptions& o, const Tokenizer& tokenizer, const ChatTemplate* chat,
                   int64_t corpus, const std::function<void(const std::string&)>& progress)
      : o_(o),
        tokenizer_(tokenizer),
        reading_{o.field, chat},
        document_start_(tokenizer.document_start()),
        utf8_(!tokenizer.lossless()),  // else it reads any bytes
        corpus_(corpus),
        progress_(progress),
        in_flight_(2 * static_cast<size_t>(std::max(1, o.threads))) {}

  /// Encodes every file into `out`, each token `wide` (uint32) or not (uint16); rethrows the
  /// first failure of any thread after stopping and joining them all.
  void run(SplitFiles& out, bool wide) {
    std::vector<std::thread> pool;
    try {  // whatever this thread meets, the others are stopped and joined below
      pool.emplace_back([this] { read(); });
      for (int t = 0; t < std::max(1, o_.threads); ++t)
        pool.emplace_back([this] { encode(); });
      write_in_order(out, wide);
    } catch (...) {
      fail(std::current_exception());
    }
    for (auto& t : pool)
      t.join();
    if (failure_) std::rethrow_exception(failure_);
  }

  int64_t tokens_written() const { return tokens_written_; }
  size_t chunks_read() const { return chunks_read_; }
  /// Totals of what was written: documents, bad lines, trained tokens, text bytes.
  const Encoded& totals() const { return totals_; }

 private:
  void fail(std::exception_ptr e) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_) failure_ = e;
    changed_.notify_all();
  }

  /// Hands a chunk to the workers once fewer than in_flight_ are unwritten; false on failure.
  bool hand_over(Chunk chunk) {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return failure_ || chunks_read_ < written_ + in_flight_; });
    if (failure_) return false;
    chunk.seq = chunks_read_++;
    ready_.push_back(std::move(chunk));
    changed_.notify_all();
    return true;
  }

  /// The reader: each file in order, cut where the tokenizer can cut or between lines.
  void read() {
    try {
      for (size_t f = 0; f < o_.files.size(); ++f) {
        const bool ok =
            reads_json_lines(o_.files[f], o_.format) ? read_json_lines(f) : read_file(f);
        if (!ok) return;
      }
      std::lock_guard<std::mutex> lock(mu_);
      read_all_ = true;
      changed_.notify_all();
    } catch (...) {
      fail(std::current_exception());
    }
  }

  /// Up to kReadBlock more bytes of `source` onto `text`, counted in read_bytes_; true at the
  /// end. A read that throws (a truncated stream) leaves `text` holding what came before it.
  bool read_more(ByteSource& source, std::string& text) {
    const size_t had = text.size();
    text.resize(had + kReadBlock);
    size_t got = 0;
    try {
      for (size_t n = 1; got < kReadBlock && n > 0; got += n)
        n = source.read(text.data() + had + got, kReadBlock - got);
    } catch (...) {
      text.resize(had + got);
      throw;
    }
    text.resize(had + got);
    read_bytes_ += static_cast<int64_t>(got);
    return got < kReadBlock;  // a read of nothing: the end
  }

  /// Text file `f` handed over in chunks; false when another thread failed.
  bool read_file(size_t f) {
    const std::unique_ptr<ByteSource> in = open_byte_source(o_.files[f], "data prepare");
    std::string text;
    int64_t offset = 0;   // of text's start in the file (0: the chunk is the file's first)
    size_t next_ask = 0;  // the size of `text` at which to look for a cut again
    for (bool end = false; !end;) {
      end = read_more(*in, text);
      const size_t cut = end                       ? text.size()
                         : text.size() >= next_ask ? tokenizer_.stable_prefix(text)
                                                   : 0;
      if (cut == 0 && !end) {        // no place to cut yet: read on, and look again at twice the
        next_ask = 2 * text.size();  // size (each byte is looked at twice on average)
        check_stretch_fits(tokenizer_, o_, f, fmt::format("offset {}", offset), text.size());
        continue;
      }
      next_ask = 0;
      if (utf8_) {
        const int64_t bad = unicode::first_stray_byte(std::string_view(text).substr(0, cut));
        VS_USER_CHECK(bad < 0,
                      "data prepare: {} is not UTF-8 (byte {} at offset {}), which "
                      "tokenizer {} reads; convert it (iconv) or use --tokenizer bytes",
                      o_.files[f], static_cast<int>(static_cast<unsigned char>(text[bad])),
                      offset + bad, o_.tokenizer);
      }
      Chunk chunk;
      chunk.first = offset == 0;
      chunk.last = end;
      chunk.text = text.substr(0, cut);
      text.erase(0, cut);
      offset += static_cast<int64_t>(cut);
      if (!hand_over(std::move(chunk))) return false;
    }
    return true;
  }

  /// JSON-lines file `f` handed over in chunks of whole lines; false when another thread failed.
  /// Under --skip-bad-lines a truncated compressed stream ends the file: its lines read whole
  /// are kept, the cut one counts as bad.
  bool read_json_lines(size_t f) {
    const std::unique_ptr<ByteSource> in = open_byte_source(o_.files[f], "data prepare");
    std::string text;
    int64_t line = 1;  // the number of text's first line
    for (bool end = false; !end;) {
      std::string bad_line;
      try {
        end = read_more(*in, text);
      } catch (const TruncatedStream&) {
        if (!o_.skip_bad_lines) throw;
        // The lines read whole are kept; a line cut short counts as bad.
        const size_t whole = text.rfind('\n');
        const size_t kept = whole == std::string::npos ? 0 : whole + 1;
        const int64_t at = line + std::count(text.begin(), text.begin() + kept, '\n');
        if (!blank_line(std::string_view(text).substr(kept)))
          bad_line =
              fmt::format("{}:{}: cut short by a truncated compressed stream", o_.files[f], at);
        progress_(
            fmt::format("[prepare] {}: truncated compressed stream after line {}; the lines "
                        "before it are kept",
                        o_.files[f], at - 1));
        text.erase(kept);
        end = true;
      }
      const size_t newline = text.rfind('\n');
      const size_t cut = end ? text.size() : newline == std::string::npos ? 0 : newline + 1;
      if (cut == 0 && !end) {  // one line longer than a block: it is encoded at once
        check_stretch_fits(tokenizer_, o_, f, fmt::format("line {}", line), text.size());
        continue;
      }
      Chunk chunk;
      chunk.json_lines = true;
      chunk.file = f;
      chunk.first_line = line;
      chunk.bad_line = std::move(bad_line);
      chunk.text = text.substr(0, cut);
      line += std::count(chunk.text.begin(), chunk.text.end(), '\n');
      text.erase(0, cut);
      if (!hand_over(std::move(chunk))) return false;
    }
    return true;
  }

  /// A document's tokens onto `e`: the document start, each segment's, the end-of-text; under
  /// --sft their mask (NOTE [Chat template]).
  void add_document(Encoded& e, const std::vector<ChatSegment>& segments) const {
    e.starts.push_back(static_cast<int64_t>(e.tokens.size()));
    const auto add = [&](const std::vector<int64_t>& tokens, bool trained) {
      e.tokens.insert(e.tokens.end(), tokens.begin(), tokens.end());
      if (!o_.sft) return;
      e.mask.insert(e.mask.end(), tokens.size(), trained ? 1 : 0);
      if (trained) e.trained += static_cast<int64_t>(tokens.size());
    };
    add(document_start_, false);
    for (const ChatSegment& s : segments)
      add(tokenizer_.encode(s.text), s.trained);
    if (const auto eot = tokenizer_.end_of_text()) add({*eot}, segments.back().trained);
    ++e.documents;
  }

  /// A chunk of JSON lines: each a document, or a bad line (a UserError naming file:line, or
  /// under --skip-bad-lines counted).
  Encoded encode_json_lines(const Chunk& chunk) const {
    Encoded e;
    std::vector<ChatSegment> segments;
    std::string why;
    size_t begin = 0;
    for (int64_t line = chunk.first_line; begin < chunk.text.size(); ++line) {
      size_t end = chunk.text.find('\n', begin);
      if (end == std::string::npos) end = chunk.text.size();
      const std::string_view text = std::string_view(chunk.text).substr(begin, end - begin);
      begin = end + 1;
      if (blank_line(text)) continue;
      if (read_json_line(text, reading_, segments, why)) {
        add_document(e, segments);
        continue;
      }
      const std::string what = fmt::format("{}:{}: {}", o_.files[chunk.file], line, why);
      if (!o_.skip_bad_lines) {
        e.error = std::make_exception_ptr(UserError(fmt::format(
            "data prepare: {} (nothing written; --skip-bad-lines counts such lines and goes on)",
            what)));
        return e;
      }
      if (e.bad_lines++ == 0) e.first_bad = what;
    }
    if (!chunk.bad_line.empty() && e.bad_lines++ == 0) e.first_bad = chunk.bad_line;
    return e;
  }

  /// A worker: chunks to tokens (a text file's document start before its first chunk, its
  /// end-of-text after its last).
  void encode() {
    for (;;) {
      Chunk chunk;
      {
        std::unique_lock<std::mutex> lock(mu_);
        changed_.wait(lock, [&] { return failure_ || !ready_.empty() || read_all_; });
        if (failure_ || ready_.empty()) return;
        chunk = std::move(ready_.front());
        ready_.pop_front();
      }
      try {
        Encoded e;
        if (chunk.json_lines) {
          e = encode_json_lines(chunk);
        } else {
          e.tokens = chunk.first ? document_start_ : std::vector<int64_t>();
          const std::vector<int64_t> text = tokenizer_.encode(chunk.text);
          e.tokens.insert(e.tokens.end(), text.begin(), text.end());
          if (chunk.last)
            if (const auto eot = tokenizer_.end_of_text()) e.tokens.push_back(*eot);
          e.documents = chunk.last ? 1 : 0;
        }
        e.bytes = chunk.text.size();
        std::lock_guard<std::mutex> lock(mu_);
        done_.emplace(chunk.seq, std::move(e));
      } catch (...) {
        fail(std::current_exception());
        return;
      }
      changed_.notify_all();
    }
  }

  /// One encoded chunk into the files, its counts into the totals.
  void write(SplitFiles& out, bool wide, const Encoded& e) {
    if (e.error) std::rethrow_exception(e.error);
    wide ? write_values<uint32_t>(out.tokens, e.tokens)
         : write_values<uint16_t>(out.tokens, e.tokens);
    if (o_.sft) {
      write_values<uint8_t>(out.mask, e.mask);
      std::vector<uint64_t> starts;
      for (int64_t s : e.starts)
        starts.push_back(static_cast<uint64_t>(tokens_written_ + s));
      write_values<uint64_t>(out.starts, starts);
    }
    tokens_written_ += static_cast<int64_t>(e.tokens.size());
    totals_.documents += e.documents;
    totals_.trained += e.trained;
    totals_.bytes += e.bytes;
    totals_.bad_lines += e.bad_lines;
    if (totals_.first_bad.empty()) totals_.first_bad = e.first_bad;
  }

  /// This thread: the encoded chunks into `out` in order, with a progress line every 2 s.
  void write_in_order(SplitFiles& out, bool wide) {
    const auto start = Clock::now();
    auto last_report = start;
    std::unique_lock<std::mutex> lock(mu_);
    while (!failure_ && !(read_all_ && written_ == chunks_read_)) {
      changed_.wait_for(lock, std::chrono::seconds(1), [&] {
        return failure_ || done_.count(written_) > 0 || (read_all_ && written_ == chunks_read_);
      });
      while (!failure_ && done_.count(written_) > 0) {
        const Encoded e = std::move(done_.at(written_));
        done_.erase(written_);
        lock.unlock();
        write(out, wide, e);
        lock.lock();
        ++written_;
        changed_.notify_all();
      }
      const auto now = Clock::now();
      if (now - last_report >= std::chrono::seconds(2)) {
        last_report = now;
        const double s = std::chrono::duration<double>(now - start).count();
        progress_(
            // Read and encoded apart: one long line may take a while to encode after its read.
            fmt::format("[prepare] {} of text read, {} encoded (the files hold {}), {} tokens, "
                        "{:.1f} MB/s",
                        format_bytes(static_cast<double>(read_bytes_.load())),
                        format_bytes(static_cast<double>(totals_.bytes)),
                        format_bytes(static_cast<double>(corpus_)), tokens_written_,
                        static_cast<double>(totals_.bytes) / 1e6 / s));
      }
    }
  }

  const PrepareOptions& o_;
  const Tokenizer& tokenizer_;
  const LineReading reading_;
  const std::vector<int64_t> document_start_;
  const bool utf8_;
  const int64_t corpus_;
  const std::function<void(const std::string&)>& progress_;
  const size_t in_flight_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::deque<Chunk> ready_;         // read, not yet encoded
  std::map<size_t, Encoded> done_;  // encoded, not yet written
  size_t chunks_read_ = 0, written_ = 0;
  std::atomic<int64_t> read_bytes_{0};  ///< of text (decompressed) the reader has read
  bool read_all_ = false;
  std::exception_ptr failure_;
  int64_t tokens_written_ = 0;
  Encoded totals_;      // the writer's
  Encoded reader_bad_;  // the lines the reader skipped
};

/// The corpus's bytes, after checking the options and the files.
int64_t check_prepare_inputs(const PrepareOptions& o) {
  VS_USER_CHECK(!o.files.empty(), "data prepare: name at least one text or JSON-lines file");
  VS_USER_CHECK(o.val_fraction > 0 && o.val_fraction < 1,
                "data prepare: --val-fraction {} must be in (0, 1)", o.val_fraction);
  VS_USER_CHECK(!o.output.empty(), "data prepare: -o DIR names the folder to write");
  VS_USER_CHECK(o.format == "auto" || o.format == "text" || o.format == "jsonl",
                "data prepare: --format {} is not auto, text or jsonl", o.format);
  VS_USER_CHECK(!o.field.empty(), "data prepare: --field is empty; name the documents' field");
  VS_USER_CHECK(!o.tokenizer.empty(),
                "data prepare: --tokenizer is empty; name \"bytes\", a SentencePiece model, a "
                "Hugging Face tokenizer.json or a folder holding one");
  VS_USER_CHECK(!o.sft || !o.chat_template.empty(),
                "data prepare: --sft renders examples with a chat template: give --template FILE "
                "(configs/templates/ has Llama 3's and ChatML)");
  VS_USER_CHECK(o.sft || o.chat_template.empty(),
                "data prepare: --template {} renders fine-tuning examples: add --sft",
                o.chat_template);
  int64_t corpus = 0;
  for (const auto& f : o.files) {
    require_regular_file(f, "data prepare: input file");
    compression_of(f, "data prepare");  // NOTE [Compressed input]: refused before any output
    VS_USER_CHECK(!o.sft || reads_json_lines(f, o.format),
                  "data prepare: --sft reads JSON lines, and {} is read as text (name it .jsonl, "
                  ".jsonl.gz or .jsonl.zst, or give --format jsonl)",
                  f);
    corpus += static_cast<int64_t>(fs::file_size(f));
  }
  VS_USER_CHECK(corpus > 0, "data prepare: {} hold{} no text", fmt::join(o.files, ", "),
                o.files.size() == 1 ? "s" : "");
  return corpus;
}

/// The files a prepare writes: the splits' tokens and meta.json; under --sft each split's mask
/// and example starts.
std::vector<std::string> output_names(bool sft) {
  std::vector<std::string> out{"train.bin", "val.bin"};
  if (sft)
    for (const char* name : {"train.mask.bin", "val.mask.bin", "train.docs.bin", "val.docs.bin"})
      out.emplace_back(name);
  return out;
}

/// Whether `meta` is the meta.json a prepare of ours writes (token_meta's keys).
bool prepared_here(const fs::path& meta) {
  const nlohmann::json j = nlohmann::json::parse(read_input_file(meta.string(), "meta.json"));
  for (const char* key : {"vocab_size", "dtype", "tokenizer", "train_tokens", "val_tokens"}) {
    if (!j.is_object() || !j.contains(key)) return false;
  }
  return true;
}

/// The output folder while a prepare writes it: none of its outputs an input, nor a file
/// another tool wrote (a nanoGPT folder's train.bin: no meta.json of ours beside it) unless
/// --overwrite; made with its missing parents; locked against a second prepare into it (whose
/// renames would replace this one's files after it reported them); and removed again with the
/// parents it made when the prepare stops before its files are committed.
class OutputFolder {
 public:
  explicit OutputFolder(const PrepareOptions& o) : path_(o.output) {
    std::vector<std::string> inputs = o.files;
    inputs.push_back(o.tokenizer);
    if (!o.chat_template.empty()) inputs.push_back(o.chat_template);
    std::vector<std::string> names = output_names(true);
    names.emplace_back("meta.json");
    for (const std::string& name : names)
      refuse_writing_over_inputs(path_ / name, inputs, "data prepare");
    for (const std::string& name : names) {
      refuse_replacing_foreign(
          path_ / name, o.overwrite,
          [this](const fs::path&) { return prepared_here(path_ / "meta.json"); }, "data prepare -o",
          "a token file of a data prepare (no meta.json of ours beside it: another tool's?)");
    }
    std::error_code ec;
    VS_USER_CHECK(!fs::exists(path_, ec) || fs::is_directory(path_, ec),
                  "data prepare -o {}: a file, not a folder; name the folder to write", o.output);
    for (fs::path p = fs::absolute(path_, ec); !p.empty() && !fs::exists(p, ec);
         p = p.parent_path())
      made_.push_back(p);
    fs::create_directories(path_, ec);
    VS_USER_CHECK(!ec, "data prepare -o {}: cannot create the folder: {}", o.output, ec.message());
    try {
      lock_ = FolderLock(path_, kPrepareLock);
    } catch (...) {
      remove_made();
      throw;
    }
  }
  OutputFolder(const OutputFolder&) = delete;
  OutputFolder& operator=(const OutputFolder&) = delete;
  ~OutputFolder() { remove_made(); }  // the lock goes in any case

  const fs::path& path() const { return path_; }
  /// The prepare's files are in place: the folder stays.
  void keep() { made_.clear(); }

 private:
  static inline const LockUse kPrepareLock{
      ".prepare.lock", "data prepare", "another data prepare",
      "two prepares must not write one folder (the later one's files would replace those the "
      "first reported). Wait for it to end, or name another -o",
      /*remove=*/true};

  /// The folders it made, deepest first, once its lock (and lock file) is gone: each only if
  /// nothing else is in it.
  void remove_made() {
    lock_ = FolderLock();
    std::error_code ec;
    for (const fs::path& p : made_)
      fs::remove(p, ec);  // a folder that holds anything stays
    made_.clear();
  }

  fs::path path_;
  std::vector<fs::path> made_;  ///< the folders it made, deepest first
  FolderLock lock_;
};

/// Removes its files when it goes, unless they were renamed first: whatever stops prepare_tokens
/// early (a refusal, a failed write) takes the partials with it.
struct RemovePartials {
  std::vector<fs::path> paths;
  ~RemovePartials() {
    std::error_code ec;
    for (const fs::path& p : paths)
      fs::remove(p, ec);
  }
};

/// NOTE [Partials on a stop signal]: while a prepare encodes, a stop signal (SIGINT, SIGTERM, a
/// closed terminal's SIGHUP) removes its partial files (unlink is async-signal-safe), then ends
/// the process with the signal's own action, as it would have. Not while the files are renamed
/// into place: commit_token_files keeps its partial meta.json on purpose.
class PartialsOnStopSignal {
 public:
  explicit PartialsOnStopSignal(const std::vector<fs::path>& paths) {
    for (const fs::path& p : paths)
      partials().push_back(p.string());  // all of them before any handler can run
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    for (size_t i = 0; i < kSignals.size(); ++i)
      ::sigaction(kSignals[i], &action, &old_[i]);
  }
  PartialsOnStopSignal(const PartialsOnStopSignal&) = delete;
  PartialsOnStopSignal& operator=(const PartialsOnStopSignal&) = delete;
  ~PartialsOnStopSignal() {
    for (size_t i = 0; i < kSignals.size(); ++i)
      ::sigaction(kSignals[i], &old_[i], nullptr);
    partials().clear();
  }

 private:
  static constexpr std::array<int, 3> kSignals{SIGINT, SIGTERM, SIGHUP};
  static std::vector<std::string>& partials() {
    static std::vector<std::string> paths;
    return paths;
  }
  static void on_signal(int sig) {
    for (const std::string& p : partials())
      ::unlink(p.c_str());
    ::signal(sig, SIG_DFL);
    ::raise(sig);
  }
  std::array<struct sigaction, 3> old_{};
};

/// meta.json's contents for `sum`, the tokenizer and under --sft the chat template.
nlohmann::json token_meta(const PrepareSummary& sum, const PrepareOptions& o,
                          const Tokenizer& tokenizer, const ChatTemplate* chat) {
  nlohmann::json meta = {{"vocab_size", sum.vocab_size}, {"dtype", sum.dtype},
                         {"tokenizer", sum.tokenizer},   {"tokenizer_path", o.tokenizer},
                         {"documents", sum.documents},   {"train_tokens", sum.train_tokens},
                         {"val_tokens", sum.val_tokens}};
  const auto eot = tokenizer.end_of_text();
  meta["end_of_text"] = eot ? nlohmann::json(*eot) : nlohmann::json(nullptr);
  meta["document_start"] = tokenizer.document_start();
  if (o.sft) {
    meta["mask"] = true;
    meta["chat_template"] = o.chat_template;
    meta["chat_template_strings"] = chat->strings();
    meta["trained_tokens"] = sum.trained_tokens;
  }
  return meta;
}

/// The new files in place of the old (NOTE [Token files]): meta.json.partial is written first,
/// the old meta.json goes next and the new one comes last; from the removal on, the partial
/// stays if this stops (a failed rename, a SIGKILL), and train refuses a folder that holds it.
/// So no folder stopped between the renames is read as one run's tokens at another run's width.
/// An earlier prepare's mask and starts go too when this one writes none.
void commit_token_files(const fs::path& folder, const nlohmann::json& meta, bool sft,
                        RemovePartials& partials) {
  const fs::path meta_tmp = folder / "meta.json.partial";
  {
    std::ofstream m(meta_tmp, std::ios::trunc);
    m << meta.dump(2) << "\n";
    VS_USER_CHECK(m.good(), "data prepare: writing {} failed: {}", meta_tmp.string(),
                  std::strerror(errno));
  }
  partials.paths.clear();
  for (const std::string& name : output_names(sft))
    partials.paths.push_back(folder / (name + ".partial"));
  std::error_code ec;
  fs::remove(folder / "meta.json", ec);
  VS_USER_CHECK(!ec, "data prepare: cannot replace {}: {}", (folder / "meta.json").string(),
                ec.message());
  for (const std::string& name : output_names(true))
    if (!sft) fs::remove(folder / name, ec);
  const auto rename = [](const fs::path& from, const fs::path& to) {
    std::error_code error;
    fs::rename(from, to, error);
    VS_USER_CHECK(!error, "data prepare: cannot rename {} to {}: {}", from.string(), to.string(),
                  error.message());
  };
  for (const std::string& name : output_names(sft))
    rename(folder / (name + ".partial"), folder / name);
  rename(meta_tmp, folder / "meta.json");
}

/// The example starts at or past `train_tokens` of `train` moved into `val`, as offsets there.
void split_starts(const fs::path& train, const fs::path& val, int64_t train_tokens) {
  std::vector<uint64_t> starts(fs::file_size(train) / sizeof(uint64_t));
  {
    std::ifstream in(train, std::ios::binary);
    in.read(reinterpret_cast<char*>(starts.data()),
            static_cast<std::streamsize>(starts.size() * sizeof(uint64_t)));
    VS_USER_CHECK(in.good(), "data prepare: reading {} failed", train.string());
  }
  const auto first_val =
      std::lower_bound(starts.begin(), starts.end(), static_cast<uint64_t>(train_tokens));
  std::vector<uint64_t> in_val(first_val, starts.end());
  for (uint64_t& s : in_val)
    s -= static_cast<uint64_t>(train_tokens);
  starts.erase(first_val, starts.end());
  std::ofstream t(train, std::ios::binary | std::ios::trunc), v(val, std::ios::binary);
  write_values<uint64_t>(t, starts);
  write_values<uint64_t>(v, in_val);
  VS_USER_CHECK(t.good() && v.good(), "data prepare: writing {} failed: {}", val.string(),
                std::strerror(errno));
}

/// The encoder's totals and the stream's split into `sum`; the tail of each file moved into
/// the val split's.
void split_outputs(const fs::path& folder, const PrepareOptions& o, const StreamingEncoder& e,
                   bool wide, PrepareSummary& sum) {
  const int64_t tokens = e.tokens_written();
  sum.documents = e.totals().documents;
  sum.chunks = static_cast<int64_t>(e.chunks_read());
  sum.text_bytes = static_cast<int64_t>(e.totals().bytes);
  sum.bad_lines = e.totals().bad_lines;
  sum.first_bad_line = e.totals().first_bad;
  sum.trained_tokens = e.totals().trained;
  VS_USER_CHECK(sum.documents > 0, "data prepare: {} hold{} no document", fmt::join(o.files, ", "),
                o.files.size() == 1 ? "s" : "");
  sum.val_tokens = static_cast<int64_t>(static_cast<double>(tokens) * o.val_fraction);
  sum.train_tokens = tokens - sum.val_tokens;
  VS_USER_CHECK(sum.val_tokens >= 2 && sum.train_tokens >= 2,
                "data prepare: {} tokens are too few to split {:g} of them off as val.bin", tokens,
                o.val_fraction);
  const auto partial = [&folder](const char* name) {
    return folder / (std::string(name) + ".partial");
  };
  split_tail(partial("train.bin"), partial("val.bin"), sum.val_tokens, wide ? 4 : 2);
  if (!o.sft) return;
  split_tail(partial("train.mask.bin"), partial("val.mask.bin"), sum.val_tokens, 1);
  split_starts(partial("train.docs.bin"), partial("val.docs.bin"), sum.train_tokens);
}

}  // namespace

bool reads_json_lines(const std::string& path, const std::string& format) {
  if (format != "auto") return format == "jsonl";
  return stem_ends_with(path, ".jsonl");  // x.JSONL, x.jsonl.gz
}

PrepareSummary prepare_tokens(const PrepareOptions& o,
                              const std::function<void(const std::string&)>& progress) {
  const int64_t corpus = check_prepare_inputs(o);
  const std::unique_ptr<Tokenizer> tokenizer = open_tokenizer(o.tokenizer);
  const std::optional<ChatTemplate> chat =
      o.sft ? std::optional(ChatTemplate::load(o.chat_template)) : std::nullopt;
  const bool wide = tokenizer->vocab_size() > 65536;
  OutputFolder output(o);
  const fs::path& folder = output.path();
  RemovePartials partials;
  for (const std::string& name : output_names(true))
    partials.paths.push_back(folder / (name + ".partial"));
  partials.paths.push_back(folder / "meta.json.partial");
  SplitFiles out;
  const auto open = [&](std::ofstream& f, const char* name) {
    const fs::path path = folder / (std::string(name) + ".partial");
    f.open(path, std::ios::binary | std::ios::trunc);
    VS_USER_CHECK(f.good(), "data prepare: cannot write {}: {}", path.string(),
                  std::strerror(errno));
  };
  open(out.tokens, "train.bin");
  if (o.sft) {
    open(out.mask, "train.mask.bin");
    open(out.starts, "train.docs.bin");
  }
  const auto start = Clock::now();
  std::optional<PartialsOnStopSignal> on_stop(std::in_place, partials.paths);
  StreamingEncoder encoder(o, *tokenizer, chat ? &*chat : nullptr, corpus, progress);
  encoder.run(out, wide);
  for (const auto& [f, name] : {std::pair{&out.tokens, "train.bin"},
                                {&out.mask, "train.mask.bin"},
                                {&out.starts, "train.docs.bin"}}) {
    if (!f->is_open()) continue;
    f->close();
    VS_USER_CHECK(f->good(), "data prepare: writing {} failed: {}",
                  (folder / (std::string(name) + ".partial")).string(), std::strerror(errno));
  }

  PrepareSummary sum;
  sum.bytes = corpus;
  split_outputs(folder, o, encoder, wide, sum);
  on_stop.reset();
  sum.vocab_size = tokenizer->vocab_size();
  sum.dtype = wide ? "uint32" : "uint16";
  sum.tokenizer = tokenizer->identity();
  commit_token_files(folder, token_meta(sum, o, *tokenizer, chat ? &*chat : nullptr), o.sft,
                     partials);
  output.keep();
  sum.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return sum;
}

}  // namespace vescale
