#include "core/input_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/error.h"
#include "core/units.h"

namespace vescale {
namespace {

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

struct stat stat_regular(const std::string& path, const std::string& what) {
  struct stat st {};
  VS_USER_CHECK(::stat(path.c_str(), &st) == 0, "{} {}: cannot read it ({})", what, path,
                std::strerror(errno));
  VS_USER_CHECK(S_ISREG(st.st_mode), "{} {}: is {}; give a regular file", what, path,
                kind_of(st.st_mode));
  return st;
}

}  // namespace

void require_regular_file(const std::string& path, const std::string& what) {
  stat_regular(path, what);
}

std::string read_input_file(const std::string& path, const std::string& what, int64_t max_bytes) {
  const struct stat st = stat_regular(path, what);
  VS_USER_CHECK(st.st_size <= max_bytes, "{} {}: {} is too large for a {} (at most {})", what, path,
                format_bytes(static_cast<double>(st.st_size)), what,
                format_bytes(static_cast<double>(max_bytes)));
  std::ifstream in(path, std::ios::binary);
  VS_USER_CHECK(in.good(), "{} {}: cannot read the file", what, path);
  // Bounded again while reading: the file may have grown since the stat.
  std::string text;
  char chunk[1 << 16];
  while (in.read(chunk, sizeof(chunk)) || in.gcount() > 0) {
    text.append(chunk, static_cast<size_t>(in.gcount()));
    VS_USER_CHECK(static_cast<int64_t>(text.size()) <= max_bytes,
                  "{} {}: grew past {} while being read", what, path,
                  format_bytes(static_cast<double>(max_bytes)));
  }
  return text;
}

}  // namespace vescale
