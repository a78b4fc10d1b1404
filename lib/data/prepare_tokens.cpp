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

}  // namespace

PrepareSummary prepare_tokens(const PrepareOptions& o,
                              const std::function<void(const std::string&)>& progress) {
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
  const std::unique_ptr<Tokenizer> tokenizer = open_tokenizer(o.tokenizer);
  const bool utf8 = !tokenizer->lossless();  // else it reads any bytes
  const std::vector<int64_t> document_start = tokenizer->document_start();
  const bool wide = tokenizer->vocab_size() > 65536;
  const size_t width = wide ? 4 : 2;
  const fs::path folder(o.output);
  std::vector<std::string> inputs = o.files;
  inputs.push_back(o.tokenizer);
  for (const char* name : {"train.bin", "val.bin", "meta.json"})
    refuse_writing_over_inputs(folder / name, inputs, "data prepare");
  {
    std::error_code ec;
    VS_USER_CHECK(!fs::exists(folder, ec) || fs::is_directory(folder, ec),
                  "data prepare -o {}: a file, not a folder; name the folder to write", o.output);
    fs::create_directories(folder, ec);
    VS_USER_CHECK(!ec, "data prepare -o {}: cannot create the folder: {}", o.output, ec.message());
  }
  const fs::path train = folder / "train.bin.partial";
  const fs::path val = folder / "val.bin.partial";
  const fs::path meta_tmp = folder / "meta.json.partial";
  // Whatever stops this function early (a refusal, a failed write) takes the partials with it.
  struct RemovePartials {
    std::vector<fs::path> paths;
    ~RemovePartials() {
      std::error_code ec;
      for (const fs::path& p : paths)
        fs::remove(p, ec);
    }
  } remove_partials{{train, val, meta_tmp}};
  std::ofstream out(train, std::ios::binary | std::ios::trunc);
  VS_USER_CHECK(out.good(), "data prepare: cannot write {}", train.string());

  // A reader cuts the files into chunks, workers encode them, this thread writes them in order
  // (NOTE [Token files]).
  const auto start = Clock::now();
  const int threads = std::max(1, o.threads);
  const size_t n = o.files.size(), in_flight = 2 * static_cast<size_t>(threads);
  std::mutex mu;
  std::condition_variable changed;
  std::deque<Chunk> ready;                                         // read, not yet encoded
  std::map<size_t, std::pair<std::vector<int64_t>, size_t>> done;  // encoded: tokens, bytes
  size_t chunks_read = 0, written = 0;
  bool read_all = false;
  std::exception_ptr failure;
  const auto fail = [&](std::exception_ptr e) {
    std::lock_guard<std::mutex> lock(mu);
    if (!failure) failure = e;
    changed.notify_all();
  };
  // Hands a chunk to the workers once fewer than `in_flight` are unwritten; false on failure.
  const auto hand_over = [&](Chunk chunk) {
    std::unique_lock<std::mutex> lock(mu);
    changed.wait(lock, [&] { return failure || chunks_read < written + in_flight; });
    if (failure) return false;
    chunk.seq = chunks_read++;
    ready.push_back(std::move(chunk));
    changed.notify_all();
    return true;
  };
  auto reader = [&] {
    try {
      for (size_t f = 0; f < n; ++f) {
        std::ifstream in(o.files[f], std::ios::binary);
        VS_USER_CHECK(in.good(), "data prepare: cannot read {}", o.files[f]);
        std::string text;
        int64_t offset = 0;   // of text's start in the file (0: the chunk is the file's first)
        size_t next_ask = 0;  // the size of `text` at which to look for a cut again
        for (bool end = false; !end;) {
          const size_t had = text.size();
          text.resize(had + kReadBlock);
          in.read(text.data() + had, static_cast<std::streamsize>(kReadBlock));
          text.resize(had + static_cast<size_t>(in.gcount()));
          end = in.eof();
          VS_USER_CHECK(end || in.good(), "data prepare: reading {} failed", o.files[f]);
          const size_t cut = end                       ? text.size()
                             : text.size() >= next_ask ? tokenizer->stable_prefix(text)
                                                       : 0;
          if (cut == 0 && !end) {  // no place to cut yet: read on, and look again at twice the
            next_ask = 2 * text.size();  // size (each byte is looked at twice on average)
            check_stretch_fits(*tokenizer, o, f, offset, text.size());
            continue;
          }
          next_ask = 0;
          if (utf8) {
            const int64_t bad = unicode::first_stray_byte(std::string_view(text).substr(0, cut));
            VS_USER_CHECK(bad < 0,
                          "data prepare: {} is not UTF-8 (byte {} at offset {}), which "
                          "tokenizer {} reads; convert it (iconv) or use --tokenizer bytes",
                          o.files[f], static_cast<int>(static_cast<unsigned char>(text[bad])),
                          offset + bad, o.tokenizer);
          }
          Chunk chunk;
          chunk.first = offset == 0;
          chunk.last = end;
          chunk.text = text.substr(0, cut);
          text.erase(0, cut);
          offset += static_cast<int64_t>(cut);
          if (!hand_over(std::move(chunk))) return;
        }
      }
      std::lock_guard<std::mutex> lock(mu);
      read_all = true;
      changed.notify_all();
    } catch (...) {
      fail(std::current_exception());
    }
  };
  auto worker = [&] {
    for (;;) {
      Chunk chunk;
      {
        std::unique_lock<std::mutex> lock(mu);
        changed.wait(lock, [&] { return failure || !ready.empty() || read_all; });
        if (failure || ready.empty()) return;
        chunk = std::move(ready.front());
        ready.pop_front();
      }
      try {
        std::vector<int64_t> tokens = chunk.first ? document_start : std::vector<int64_t>();
        const std::vector<int64_t> text = tokenizer->encode(chunk.text);
        tokens.insert(tokens.end(), text.begin(), text.end());
        if (chunk.last)
          if (const auto eot = tokenizer->end_of_text()) tokens.push_back(*eot);
        std::lock_guard<std::mutex> lock(mu);
        done.emplace(chunk.seq, std::make_pair(std::move(tokens), chunk.text.size()));
      } catch (...) {
        fail(std::current_exception());
        return;
      }
      changed.notify_all();
    }
  };
  std::vector<std::thread> pool;
  int64_t tokens_written = 0, bytes_done = 0;
  auto last_report = start;
  try {  // whatever this thread meets, the others are stopped and joined below
    pool.emplace_back(reader);
    for (int t = 0; t < threads; ++t)
      pool.emplace_back(worker);
    std::unique_lock<std::mutex> lock(mu);
    while (!failure && !(read_all && written == chunks_read)) {
      changed.wait_for(lock, std::chrono::seconds(1), [&] {
        return failure || done.count(written) > 0 || (read_all && written == chunks_read);
      });
      while (!failure && done.count(written) > 0) {
        auto [tokens, bytes] = std::move(done.at(written));
        done.erase(written);
        lock.unlock();
        wide ? write_tokens<uint32_t>(out, tokens) : write_tokens<uint16_t>(out, tokens);
        tokens_written += static_cast<int64_t>(tokens.size());
        bytes_done += static_cast<int64_t>(bytes);
        lock.lock();
        ++written;
        changed.notify_all();
      }
      const auto now = Clock::now();
      if (now - last_report >= std::chrono::seconds(2)) {
        last_report = now;
        const double s = std::chrono::duration<double>(now - start).count();
        progress(fmt::format("[prepare] {} of {} read, {} tokens, {:.1f} MB/s",
                             format_bytes(static_cast<double>(bytes_done)),
                             format_bytes(static_cast<double>(corpus)), tokens_written,
                             static_cast<double>(bytes_done) / 1e6 / s));
      }
    }
  } catch (...) {
    fail(std::current_exception());
  }
  for (auto& t : pool)
    t.join();
  if (failure) {
    out.close();
    std::rethrow_exception(failure);
  }
  out.close();
  VS_USER_CHECK(out.good(), "data prepare: writing {} failed", train.string());

  PrepareSummary sum;
  sum.documents = static_cast<int64_t>(n);
  sum.chunks = static_cast<int64_t>(chunks_read);
  sum.bytes = corpus;
  sum.val_tokens = static_cast<int64_t>(static_cast<double>(tokens_written) * o.val_fraction);
  sum.train_tokens = tokens_written - sum.val_tokens;
  VS_USER_CHECK(sum.val_tokens >= 2 && sum.train_tokens >= 2,
                "data prepare: {} tokens are too few to split {:g} of them off as val.bin",
                tokens_written, o.val_fraction);
  split_tail(train, val, sum.val_tokens, width);
  sum.vocab_size = tokenizer->vocab_size();
  sum.dtype = wide ? "uint32" : "uint16";
  sum.tokenizer = tokenizer->identity();
  nlohmann::json meta = {{"vocab_size", sum.vocab_size}, {"dtype", sum.dtype},
                         {"tokenizer", sum.tokenizer},   {"tokenizer_path", o.tokenizer},
                         {"documents", sum.documents},   {"train_tokens", sum.train_tokens},
                         {"val_tokens", sum.val_tokens}};
  const auto eot = tokenizer->end_of_text();
  meta["end_of_text"] = eot ? nlohmann::json(*eot) : nlohmann::json(nullptr);
  meta["document_start"] = document_start;
  {
    std::ofstream m(meta_tmp, std::ios::trunc);
    m << meta.dump(2) << "\n";
    VS_USER_CHECK(m.good(), "data prepare: writing {} failed", meta_tmp.string());
  }
  // NOTE [Token files]: the new meta.json.partial is written first, the old meta.json goes
  // next and the new one comes last; from here on the partial stays if this stops (a failed
  // rename, a SIGKILL), and train refuses a folder that holds it. So no folder stopped between
  // the renames is read as one run's tokens at another run's width. Train also checks each
  // .bin's token count against meta.json's.
  remove_partials.paths = {train, val};
  std::error_code ec;
  fs::remove(folder / "meta.json", ec);
  VS_USER_CHECK(!ec, "data prepare: cannot replace {}: {}", (folder / "meta.json").string(),
                ec.message());
  fs::rename(train, folder / "train.bin");
  fs::rename(val, folder / "val.bin");
  fs::rename(meta_tmp, folder / "meta.json");
  sum.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return sum;
}

}  // namespace vescale
