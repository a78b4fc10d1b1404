#include "data/streaming_encoder.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include "config/memory_estimate.h"
#include "core/error.h"
#include "core/units.h"
#include "data/byte_source.h"
#include "data/json_lines.h"
#include "tokenize/unicode.h"

namespace vescale::detail {
namespace {

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

  /// Totals of what was written, and the chunks read.
  EncodedTotals totals() const {
    EncodedTotals out = totals_;
    out.chunks = static_cast<int64_t>(chunks_read_);
    return out;
  }

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
        starts.push_back(static_cast<uint64_t>(totals_.tokens + s));
      write_values<uint64_t>(out.starts, starts);
    }
    totals_.tokens += static_cast<int64_t>(e.tokens.size());
    totals_.documents += e.documents;
    totals_.trained += e.trained;
    totals_.text_bytes += static_cast<int64_t>(e.bytes);
    totals_.bad_lines += e.bad_lines;
    if (totals_.first_bad_line.empty()) totals_.first_bad_line = e.first_bad;
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
                        format_bytes(static_cast<double>(totals_.text_bytes)),
                        format_bytes(static_cast<double>(corpus_)), totals_.tokens,
                        static_cast<double>(totals_.text_bytes) / 1e6 / s));
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
  EncodedTotals totals_;  // the writer's (chunks: chunks_read_)
  Encoded reader_bad_;    // the lines the reader skipped
};

}  // namespace

EncodedTotals encode_files(const PrepareOptions& o, const Tokenizer& tokenizer,
                           const ChatTemplate* chat, int64_t corpus,
                           const std::function<void(const std::string&)>& progress, SplitFiles& out,
                           bool wide) {
  StreamingEncoder encoder(o, tokenizer, chat, corpus, progress);
  encoder.run(out, wide);
  return encoder.totals();
}

}  // namespace vescale::detail
