// A corpus file's bytes as they are read, decompressed on the way: plain, gzip (`.gz`, zlib) or
// zstd (`.zst`, libzstd), by the name's ending; each compressed file's magic number is checked
// first. Reads stream through fixed buffers, so memory stays bounded whatever the file's size.
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

/// By the file name's ending: ".gz" gzip, ".zst" zstd, else none.
Compression compression_of(const std::string& path);
/// "gzip", "zstd" or "plain".
const char* compression_name(Compression c);

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  /// Up to `n` bytes into `out`; 0 only at the end. Throws UserError naming the file when the
  /// stream is damaged or ends inside a compressed frame ("truncated compressed stream").
  virtual size_t read(char* out, size_t n) = 0;
  /// The file's bytes consumed so far (compressed bytes for a compressed file).
  virtual int64_t consumed() const = 0;
};

/// The file at `path` decompressed by compression_of(path). `what` starts messages ("data
/// prepare").
std::unique_ptr<ByteSource> open_byte_source(const std::string& path, const std::string& what);

}  // namespace vescale
