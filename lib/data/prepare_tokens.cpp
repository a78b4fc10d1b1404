#include "data/prepare_tokens.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "config/memory_estimate.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/safe_files.h"
#include "core/units.h"
#include "tokenize/tokenizer.h"
#include "tokenize/unicode.h"

namespace vescale {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

/// The bytes read at a time from a file; a piece of text is encoded once the tokenizer can cut
/// it (Tokenizer::stable_prefix), so a file of any size streams through.
constexpr size_t kReadBlock = size_t{1} << 20;

/// A piece of one file, encoded on its own.
struct Chunk {
  size_t seq = 0;
  std::string text;
  bool first = false;  ///< the file's start: the document start precedes (NOTE [Document start])
  bool last = false;   ///< the file's end: the end-of-text token follows
};

/// Appends `tokens` to `out` in the file's width.
template <typename T>
void write_tokens(std::ofstream& out, const std::vector<int64_t>& tokens) {
  std::vector<T> narrow(tokens.begin(), tokens.end());
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
  VS_USER_CHECK(in.good() && out.good(), "data prepare: writing {} failed", to.string());
  fs::resize_file(from, static_cast<uintmax_t>(keep));
}

/// A stretch of `bytes` from `offset` of file `f` that the tokenizer cannot cut is encoded at
/// once: refused when that would take more than half of this machine's memory.
void check_stretch_fits(const Tokenizer& tokenizer, const PrepareOptions& o, size_t f,
                        int64_t offset, size_t bytes) {
  const double need = tokenizer.encode_memory_per_byte() * static_cast<double>(bytes);
  const double memory = physical_memory_bytes();
  VS_USER_CHECK(
      memory <= 0 || need <= memory / 2,
      "data prepare: {} has {} from offset {} with no place where tokenizer {} can cut (no space "
      "between words, or a model that encodes a file whole), which it would encode at once in "
      "about {} ({:.0f} bytes a byte) of this machine's {}; break the text up, e.g. into lines "
      "of words",
      o.files[f], format_bytes(static_cast<double>(bytes)), offset, o.tokenizer, format_bytes(need),
      tokenizer.encode_memory_per_byte(), format_bytes(memory));
}

/// The streaming encode of NOTE [Token files]: a reader thread cuts the files into chunks where
/// the tokenizer can cut, `threads` workers encode them, and the calling thread writes them in
/// order, at most 2 x threads chunks in memory at once.
class StreamingEncoder {
 public:
  StreamingEncoder(const PrepareOptions& o, const Tokenizer& tokenizer, int64_t corpus,
                   const std::function<void(const std::string&)>& progress)
      : o_(o),
        tokenizer_(tokenizer),
        document_start_(tokenizer.document_start()),
        utf8_(!tokenizer.lossless()),  // else it reads any bytes
        corpus_(corpus),
        progress_(progress),
        in_flight_(2 * static_cast<size_t>(std::max(1, o.threads))) {}

  /// Encodes every file into `out`, each token `wide` (uint32) or not (uint16); rethrows the
  /// first failure of any thread after stopping and joining them all.
  void run(std::ofstream& out, bool wide) {
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

  /// The reader: each file in order, cut where the tokenizer can cut.
  void read() {
    try {
      for (size_t f = 0; f < o_.files.size(); ++f) {
        if (!read_file(f)) return;
      }
      std::lock_guard<std::mutex> lock(mu_);
      read_all_ = true;
      changed_.notify_all();
    } catch (...) {
      fail(std::current_exception());
    }
  }

  /// File `f` handed over in chunks; false when another thread failed.
  bool read_file(size_t f) {
    std::ifstream in(o_.files[f], std::ios::binary);
    VS_USER_CHECK(in.good(), "data prepare: cannot read {}", o_.files[f]);
    std::string text;
    int64_t offset = 0;   // of text's start in the file (0: the chunk is the file's first)
    size_t next_ask = 0;  // the size of `text` at which to look for a cut again
    for (bool end = false; !end;) {
      const size_t had = text.size();
      text.resize(had + kReadBlock);
      in.read(text.data() + had, static_cast<std::streamsize>(kReadBlock));
      text.resize(had + static_cast<size_t>(in.gcount()));
      end = in.eof();
      VS_USER_CHECK(end || in.good(), "data prepare: reading {} failed", o_.files[f]);
      const size_t cut = end                       ? text.size()
                         : text.size() >= next_ask ? tokenizer_.stable_prefix(text)
                                                   : 0;
      if (cut == 0 && !end) {        // no place to cut yet: read on, and look again at twice the
        next_ask = 2 * text.size();  // size (each byte is looked at twice on average)
        check_stretch_fits(tokenizer_, o_, f, offset, text.size());
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

  /// A worker: chunks to tokens (the document start before a file's first, its end-of-text
  /// after its last).
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
        std::vector<int64_t> tokens = chunk.first ? document_start_ : std::vector<int64_t>();
        const std::vector<int64_t> text = tokenizer_.encode(chunk.text);
        tokens.insert(tokens.end(), text.begin(), text.end());
        if (chunk.last)
          if (const auto eot = tokenizer_.end_of_text()) tokens.push_back(*eot);
        std::lock_guard<std::mutex> lock(mu_);
        done_.emplace(chunk.seq, std::make_pair(std::move(tokens), chunk.text.size()));
      } catch (...) {
        fail(std::current_exception());
        return;
      }
      changed_.notify_all();
    }
  }

  /// This thread: the encoded chunks into `out` in order, with a progress line every 2 s.
  void write_in_order(std::ofstream& out, bool wide) {
    const auto start = Clock::now();
    auto last_report = start;
    int64_t bytes_done = 0;
    std::unique_lock<std::mutex> lock(mu_);
    while (!failure_ && !(read_all_ && written_ == chunks_read_)) {
      changed_.wait_for(lock, std::chrono::seconds(1), [&] {
        return failure_ || done_.count(written_) > 0 || (read_all_ && written_ == chunks_read_);
      });
      while (!failure_ && done_.count(written_) > 0) {
        auto [tokens, bytes] = std::move(done_.at(written_));
        done_.erase(written_);
        lock.unlock();
        wide ? write_tokens<uint32_t>(out, tokens) : write_tokens<uint16_t>(out, tokens);
        tokens_written_ += static_cast<int64_t>(tokens.size());
        bytes_done += static_cast<int64_t>(bytes);
        lock.lock();
        ++written_;
        changed_.notify_all();
      }
      const auto now = Clock::now();
      if (now - last_report >= std::chrono::seconds(2)) {
        last_report = now;
        const double s = std::chrono::duration<double>(now - start).count();
        progress_(fmt::format("[prepare] {} of {} read, {} tokens, {:.1f} MB/s",
                              format_bytes(static_cast<double>(bytes_done)),
                              format_bytes(static_cast<double>(corpus_)), tokens_written_,
                              static_cast<double>(bytes_done) / 1e6 / s));
      }
    }
  }

  const PrepareOptions& o_;
  const Tokenizer& tokenizer_;
  const std::vector<int64_t> document_start_;
  const bool utf8_;
  const int64_t corpus_;
  const std::function<void(const std::string&)>& progress_;
  const size_t in_flight_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::deque<Chunk> ready_;                                         // read, not yet encoded
  std::map<size_t, std::pair<std::vector<int64_t>, size_t>> done_;  // encoded: tokens, bytes
  size_t chunks_read_ = 0, written_ = 0;
  bool read_all_ = false;
  std::exception_ptr failure_;
  int64_t tokens_written_ = 0;
};

/// The corpus's bytes, after checking the options and the files.
int64_t check_prepare_inputs(const PrepareOptions& o) {
  VS_USER_CHECK(!o.files.empty(), "data prepare: name at least one text file");
  VS_USER_CHECK(o.val_fraction > 0 && o.val_fraction < 1,
                "data prepare: --val-fraction {} must be in (0, 1)", o.val_fraction);
  VS_USER_CHECK(!o.output.empty(), "data prepare: -o DIR names the folder to write");
  int64_t corpus = 0;
  for (const auto& f : o.files) {
    require_regular_file(f, "data prepare: text file");
    corpus += static_cast<int64_t>(fs::file_size(f));
  }
  VS_USER_CHECK(corpus > 0, "data prepare: {} hold{} no text", fmt::join(o.files, ", "),
                o.files.size() == 1 ? "s" : "");
  return corpus;
}

/// The output folder, made; none of its outputs is an input.
fs::path make_output_folder(const PrepareOptions& o) {
  const fs::path folder(o.output);
  std::vector<std::string> inputs = o.files;
  inputs.push_back(o.tokenizer);
  for (const char* name : {"train.bin", "val.bin", "meta.json"})
    refuse_writing_over_inputs(folder / name, inputs, "data prepare");
  std::error_code ec;
  VS_USER_CHECK(!fs::exists(folder, ec) || fs::is_directory(folder, ec),
                "data prepare -o {}: a file, not a folder; name the folder to write", o.output);
  fs::create_directories(folder, ec);
  VS_USER_CHECK(!ec, "data prepare -o {}: cannot create the folder: {}", o.output, ec.message());
  return folder;
}

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

/// meta.json's contents for `sum` and the tokenizer.
nlohmann::json token_meta(const PrepareSummary& sum, const PrepareOptions& o,
                          const Tokenizer& tokenizer) {
  nlohmann::json meta = {{"vocab_size", sum.vocab_size}, {"dtype", sum.dtype},
                         {"tokenizer", sum.tokenizer},   {"tokenizer_path", o.tokenizer},
                         {"documents", sum.documents},   {"train_tokens", sum.train_tokens},
                         {"val_tokens", sum.val_tokens}};
  const auto eot = tokenizer.end_of_text();
  meta["end_of_text"] = eot ? nlohmann::json(*eot) : nlohmann::json(nullptr);
  meta["document_start"] = tokenizer.document_start();
  return meta;
}

/// The new files in place of the old (NOTE [Token files]): meta.json.partial is written first,
/// the old meta.json goes next and the new one comes last; from the removal on, the partial
/// stays if this stops (a failed rename, a SIGKILL), and train refuses a folder that holds it.
/// So no folder stopped between the renames is read as one run's tokens at another run's width.
void commit_token_files(const fs::path& folder, const nlohmann::json& meta,
                        RemovePartials& partials) {
  const fs::path meta_tmp = folder / "meta.json.partial";
  {
    std::ofstream m(meta_tmp, std::ios::trunc);
    m << meta.dump(2) << "\n";
    VS_USER_CHECK(m.good(), "data prepare: writing {} failed", meta_tmp.string());
  }
  partials.paths = {folder / "train.bin.partial", folder / "val.bin.partial"};
  std::error_code ec;
  fs::remove(folder / "meta.json", ec);
  VS_USER_CHECK(!ec, "data prepare: cannot replace {}: {}", (folder / "meta.json").string(),
                ec.message());
  fs::rename(folder / "train.bin.partial", folder / "train.bin");
  fs::rename(folder / "val.bin.partial", folder / "val.bin");
  fs::rename(meta_tmp, folder / "meta.json");
}

}  // namespace

PrepareSummary prepare_tokens(const PrepareOptions& o,
                              const std::function<void(const std::string&)>& progress) {
  const int64_t corpus = check_prepare_inputs(o);
  const std::unique_ptr<Tokenizer> tokenizer = open_tokenizer(o.tokenizer);
  const bool wide = tokenizer->vocab_size() > 65536;
  const fs::path folder = make_output_folder(o);
  const fs::path train = folder / "train.bin.partial", val = folder / "val.bin.partial";
  RemovePartials partials{{train, val, folder / "meta.json.partial"}};
  std::ofstream out(train, std::ios::binary | std::ios::trunc);
  VS_USER_CHECK(out.good(), "data prepare: cannot write {}", train.string());
  const auto start = Clock::now();
  StreamingEncoder encoder(o, *tokenizer, corpus, progress);
  encoder.run(out, wide);
  out.close();
  VS_USER_CHECK(out.good(), "data prepare: writing {} failed", train.string());

  PrepareSummary sum;
  const int64_t tokens = encoder.tokens_written();
  sum.documents = static_cast<int64_t>(o.files.size());
  sum.chunks = static_cast<int64_t>(encoder.chunks_read());
  sum.bytes = corpus;
  sum.val_tokens = static_cast<int64_t>(static_cast<double>(tokens) * o.val_fraction);
  sum.train_tokens = tokens - sum.val_tokens;
  VS_USER_CHECK(sum.val_tokens >= 2 && sum.train_tokens >= 2,
                "data prepare: {} tokens are too few to split {:g} of them off as val.bin", tokens,
                o.val_fraction);
  split_tail(train, val, sum.val_tokens, wide ? 4 : 2);
  sum.vocab_size = tokenizer->vocab_size();
  sum.dtype = wide ? "uint32" : "uint16";
  sum.tokenizer = tokenizer->identity();
  commit_token_files(folder, token_meta(sum, o, *tokenizer), partials);
  sum.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return sum;
}

}  // namespace vescale
