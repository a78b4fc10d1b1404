#include "data/byte_source.h"

#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include <array>
#include <cctype>
#include <cmath>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <vector>

#include "config/memory_estimate.h"
#include "core/error.h"

namespace vescale {
namespace {

/// Whether `text` ends in `suffix`, in any case (".GZ" is ".gz").
bool has_suffix(const std::string& text, const std::string& suffix) {
  if (text.size() < suffix.size()) return false;
  for (size_t i = 0; i < suffix.size(); ++i) {
    const char c = text[text.size() - suffix.size() + i];
    if (std::tolower(static_cast<unsigned char>(c)) != suffix[i]) return false;
  }
  return true;
}

/// A compressed format: its name, its file names' ending, the tool that decompresses it, and
/// whether `head` (the file's first bytes) starts as it does.
struct Format {
  const char* name;
  const char* ending;
  const char* tool;  ///< nullptr: one we read
  bool (*starts)(const std::string& head);
};

bool starts_with_bytes(const std::string& head, std::initializer_list<unsigned char> bytes) {
  if (head.size() < bytes.size()) return false;
  size_t i = 0;
  for (const unsigned char b : bytes)
    if (static_cast<unsigned char>(head[i++]) != b) return false;
  return true;
}

const std::array<Format, 7> kFormats{{
    {"gzip", ".gz", nullptr,
     [](const std::string& h) {
       return starts_with_bytes(h, {0x1f, 0x8b});
     }},
    {"zstd", ".zst", nullptr,
     [](const std::string& h) {
       // A zstd frame, or a skippable frame (magic 0x184D2A50 to 0x184D2A5F, little-endian).
       return starts_with_bytes(h, {0x28, 0xb5, 0x2f, 0xfd}) ||
              (h.size() >= 4 && (static_cast<unsigned char>(h[0]) & 0xf0) == 0x50 &&
               starts_with_bytes(h.substr(1), {0x2a, 0x4d, 0x18}));
     }},
    {"bzip2", ".bz2", "bunzip2 -k",
     [](const std::string& h) {
       return h.size() >= 10 && h.compare(0, 3, "BZh") == 0 && h[3] >= '1' && h[3] <= '9' &&
              h.compare(4, 6, "1AY&SY") == 0;
     }},
    {"xz", ".xz", "unxz -k",
     [](const std::string& h) {
       return starts_with_bytes(h, {0xfd, '7', 'z', 'X', 'Z', 0x00});
     }},
    {"lz4", ".lz4", "unlz4 -k",
     [](const std::string& h) {
       return starts_with_bytes(h, {0x04, 0x22, 0x4d, 0x18});
     }},
    {"zip", ".zip", "unzip",
     [](const std::string& h) {
       return starts_with_bytes(h, {'P', 'K', 0x03, 0x04});
     }},
    {"7z", ".7z", "7z x",
     [](const std::string& h) {
       return starts_with_bytes(h, {'7', 'z', 0xbc, 0xaf, 0x27, 0x1c});
     }},
}};

/// Compressed bytes read from the file at a time.
constexpr size_t kInputBlock = size_t{1} << 18;

/// The file's bytes as they are.
class PlainSource : public ByteSource {
 public:
  PlainSource(const std::string& path, const std::string& what) : path_(path), what_(what) {
    in_.open(path, std::ios::binary);
    VS_USER_CHECK(in_.good(), "{}: cannot read {}", what, path);
  }
  size_t read(char* out, size_t n) override {
    in_.read(out, static_cast<std::streamsize>(n));
    const auto got = static_cast<size_t>(in_.gcount());
    VS_USER_CHECK(got == n || in_.eof(), "{}: reading {} failed", what_, path_);
    consumed_ += static_cast<int64_t>(got);
    return got;
  }
  int64_t consumed() const override { return consumed_; }

 protected:
  std::string path_, what_;
  std::ifstream in_;
  int64_t consumed_ = 0;
};

/// A compressed file: its input buffer, refilled from the file, and the magic number checked.
class CompressedSource : public PlainSource {
 public:
  CompressedSource(const std::string& path, const std::string& what, Compression kind)
      : PlainSource(path, what), kind_(kind), input_(kInputBlock) {}

 protected:
  /// Refills the input once it is used up; false at the file's end.
  bool refill() {
    if (at_ < filled_) return true;
    filled_ = PlainSource::read(input_.data(), input_.size());
    at_ = 0;
    return filled_ > 0;
  }
  /// Whether the rest of the file is zeros (the padding some tools write after the last gzip
  /// member); reads it to its end.
  bool rest_is_zeros() {
    for (;;) {
      for (; at_ < filled_; ++at_)
        if (input_[at_] != 0) return false;
      if (!refill()) return true;
    }
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw UserError(fmt::format("{}: {} is not a valid {} file: {}", what_, path_,
                                compression_name(kind_), why));
  }
  [[noreturn]] void truncated() const {
    throw TruncatedStream(
        fmt::format("{}: {}: truncated compressed stream: the file ends inside a "
                    "{} frame (an interrupted download or copy?)",
                    what_, path_, compression_name(kind_)));
  }

  Compression kind_;
  std::vector<char> input_;
  size_t filled_ = 0, at_ = 0;
};

/// gzip through zlib: every member of a multi-member file, one after another.
class GzipSource : public CompressedSource {
 public:
  GzipSource(const std::string& path, const std::string& what)
      : CompressedSource(path, what, Compression::kGzip) {
    // 16 + MAX_WBITS: a gzip header and trailer, not a bare zlib stream.
    if (inflateInit2(&z_, 16 + MAX_WBITS) != Z_OK) fail("zlib could not start");
  }
  ~GzipSource() override { inflateEnd(&z_); }
  size_t read(char* out, size_t n) override {
    size_t got = 0;
    while (got < n) {
      // At the file's end inflate still runs once with no input: it may hold output back.
      const bool more = refill();
      if (!more && !in_member_) break;
      z_.next_in = reinterpret_cast<Bytef*>(input_.data() + at_);
      z_.avail_in = static_cast<uInt>(filled_ - at_);
      z_.next_out = reinterpret_cast<Bytef*>(out + got);
      z_.avail_out = static_cast<uInt>(n - got);
      in_member_ = true;
      const size_t before = got;
      const int rc = inflate(&z_, Z_NO_FLUSH);
      got = n - z_.avail_out;
      at_ = filled_ - z_.avail_in;
      if (rc == Z_STREAM_END) {
        in_member_ = false;
        if (inflateReset(&z_) != Z_OK) fail("zlib could not go on to the next member");
        // What follows a member is another member, or zero padding to the end.
        if (refill() && input_[at_] == 0) {
          if (!rest_is_zeros()) fail("bytes after the zero padding that follows its last member");
          break;
        }
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        fail(z_.msg != nullptr ? z_.msg : "inflate failed");
      } else if (!more && got == before) {
        if (got > 0) break;  // what came is good: the next read says the stream is cut
        truncated();
      }
    }
    return got;
  }
  int64_t consumed() const override { return consumed_ - static_cast<int64_t>(filled_ - at_); }

 private:
  z_stream z_{};
  bool in_member_ = false;  ///< inside a member that has not ended
};

/// zstd through libzstd's streaming decompression: every frame, one after another.
class ZstdSource : public CompressedSource {
 public:
  ZstdSource(const std::string& path, const std::string& what)
      : CompressedSource(path, what, Compression::kZstd), z_(ZSTD_createDStream()) {
    if (z_ == nullptr) fail("libzstd could not start");
    // zstd --long writes windows past libzstd's default limit of 2^27 bytes: take any up to a
    // quarter of this machine's memory (2^31 at most, zstd's own).
    window_log_ = 27;
    const int most = ZSTD_dParam_getBounds(ZSTD_d_windowLogMax).upperBound;
    while (window_log_ < most && std::ldexp(1.0, window_log_ + 1) <= physical_memory_bytes() / 4)
      ++window_log_;
    ZSTD_DCtx_setParameter(z_, ZSTD_d_windowLogMax, window_log_);
  }
  ~ZstdSource() override { ZSTD_freeDStream(z_); }
  size_t read(char* out, size_t n) override {
    ZSTD_outBuffer o{out, n, 0};
    while (o.pos < n) {
      // At the file's end the stream still runs once with no input: it may hold output back.
      const bool more = refill();
      if (!more && !in_frame_) break;
      ZSTD_inBuffer in{input_.data() + at_, filled_ - at_, 0};
      const size_t before = o.pos;
      const size_t left = ZSTD_decompressStream(z_, &o, &in);
      at_ += in.pos;
      if (ZSTD_getErrorCode(left) == ZSTD_error_frameParameter_windowTooLarge) {
        fail(
            fmt::format("a frame needs a window of more than 2^{} bytes (zstd --long), more "
                        "than a quarter of this machine's memory; decompress it where memory "
                        "allows, or compress it with a smaller --long",
                        window_log_));
      }
      if (ZSTD_isError(left)) fail(ZSTD_getErrorName(left));
      in_frame_ = left != 0;  // 0: a frame ended here, all of it written out
      if (!more && o.pos == before && in_frame_) {
        if (o.pos > 0) break;  // what came is good: the next read says the stream is cut
        truncated();
      }
    }
    return o.pos;
  }
  int64_t consumed() const override { return consumed_ - static_cast<int64_t>(filled_ - at_); }

 private:
  ZSTD_DStream* z_;
  int window_log_ = 0;
  bool in_frame_ = false;
};

}  // namespace

Compression compression_of(const std::string& path, const std::string& what) {
  std::string head(16, '\0');
  {
    std::ifstream in(path, std::ios::binary);
    VS_USER_CHECK(in.good(), "{}: cannot read {}", what, path);
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    head.resize(static_cast<size_t>(in.gcount()));
  }
  const Format* named = nullptr;  // what the name says
  const Format* holds = nullptr;  // what the bytes are
  for (const Format& f : kFormats) {
    if (has_suffix(path, f.ending)) named = &f;
    if (f.starts(head)) holds = &f;
  }
  if (holds != nullptr && holds->tool != nullptr) {
    throw UserError(fmt::format(
        "{}: {} holds {}-compressed bytes (its first bytes), which {} does not read: decompress "
        "it first ({} {}), or compress it with gzip or zstd",
        what, path, holds->name, what, holds->tool, path));
  }
  VS_USER_CHECK(named == nullptr || named == holds || head.empty(),
                "{}: {}'s name ends in {} but it holds {} (its first bytes); rename it to what it "
                "holds",
                what, path, named ? named->ending : "", holds ? holds->name : "no compressed data");
  if (holds == nullptr) return Compression::kNone;
  return std::string(holds->name) == "gzip" ? Compression::kGzip : Compression::kZstd;
}

bool stem_ends_with(const std::string& path, const std::string& ending) {
  std::string stem = path;
  for (const Format& f : kFormats) {
    if (has_suffix(stem, f.ending)) {
      stem.resize(stem.size() - std::strlen(f.ending));
      break;
    }
  }
  return has_suffix(stem, ending);
}

const char* compression_name(Compression c) {
  switch (c) {
    case Compression::kGzip:
      return "gzip";
    case Compression::kZstd:
      return "zstd";
    case Compression::kNone:
      break;
  }
  return "plain";
}

std::unique_ptr<ByteSource> open_byte_source(const std::string& path, const std::string& what) {
  switch (compression_of(path, what)) {
    case Compression::kGzip:
      return std::make_unique<GzipSource>(path, what);
    case Compression::kZstd:
      return std::make_unique<ZstdSource>(path, what);
    case Compression::kNone:
      break;
  }
  return std::make_unique<PlainSource>(path, what);
}

}  // namespace vescale
