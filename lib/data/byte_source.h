// A corpus file's bytes as they are read, decompressed on the way: plain, gzip (zlib) or zstd
// (libzstd), told by the file's first bytes (NOTE [Compressed input]). Reads stream through
// fixed buffers, so memory stays bounded whatever the file's size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/error.h"

namespace vescale {

/// A compressed file that ends inside a frame: what was read before it is good.
class TruncatedStream : public UserError {
 public:
  using UserError::UserError;
};

enum class Compression { kNone, kGzip, kZstd };

/// NOTE [Compressed input]
/// A corpus file is told by its first bytes, not its name: gzip (1f 8b) and zstd (28 b5 2f fd,
/// or a skippable frame first, as pzstd writes) are decompressed whatever the file is called,
/// with zstd's long windows (zstd --long) up to a quarter of this machine's memory; a
/// compression we do not read (bzip2, xz, lz4, zip, 7z) is refused by name, as is a file whose
/// name says one compression (.gz, .zst, .bz2, .xz, .lz4, .zip, .7z, in any case) and whose
/// bytes hold another or none: one line naming the file and what it holds. `what` starts the
/// message ("data prepare").
Compression compression_of(const std::string& path, const std::string& what);
/// "gzip", "zstd" or "plain".
const char* compression_name(Compression c);
/// Whether `path`'s name, less the ending of a compression it names (.gz, .zst, .bz2, .xz, .lz4,
/// .zip, .7z), ends in `ending` (lowercase), in any case: "x.JSONL.gz" ends in ".jsonl".
bool stem_ends_with(const std::string& path, const std::string& ending);

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  /// Up to `n` bytes into `out`; 0 only at the end. Throws UserError naming the file when the
  /// stream is damaged or ends inside a compressed frame ("truncated compressed stream").
  virtual size_t read(char* out, size_t n) = 0;
  /// The file's bytes consumed so far (compressed bytes for a compressed file).
  virtual int64_t consumed() const = 0;
};

/// The file at `path` decompressed as compression_of(path, what) says. `what` starts messages
/// ("data prepare").
std::unique_ptr<ByteSource> open_byte_source(const std::string& path, const std::string& what);

}  // namespace vescale
