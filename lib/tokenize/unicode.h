// What the pre-tokenizer regexes of byte-level BPE tokenizers ask of Unicode (NOTE [Byte-level
// BPE]): the general category of a code point, its simple case folding, White_Space, and UTF-8
// read leniently: each byte that is not part of well-formed UTF-8 stands for itself.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vescale::unicode {

/// Unicode general categories, in the order of scripts/gen-unicode-tables.py.
enum Category : uint8_t {
  kLu,
  kLl,
  kLt,
  kLm,
  kLo,
  kMn,
  kMc,
  kMe,
  kNd,
  kNl,
  kNo,
  kPc,
  kPd,
  kPs,
  kPe,
  kPi,
  kPf,
  kPo,
  kSm,
  kSc,
  kSk,
  kSo,
  kZs,
  kZl,
  kZp,
  kCc,
  kCf,
  kCs,
  kCo,
  kCn,
  kCategoryCount
};

struct CategoryRun {
  char32_t start;
  uint8_t category;
};
struct CaseFold {
  char32_t from, to;
};
extern const CategoryRun kCategoryRuns[];
extern const int kCategoryRunCount;
extern const CaseFold kCaseFolds[];
extern const int kCaseFoldCount;

/// A byte that is not part of well-formed UTF-8 reads as this code point plus the byte (a lone
/// surrogate, as Python's 'surrogateescape' reads it): category Cs, never a letter, number or
/// space, and never the reading of well-formed UTF-8.
constexpr char32_t kStrayByteBase = 0xDC00;

Category category(char32_t c);
/// The simple case folding of c (c itself where it has none).
char32_t fold(char32_t c);
/// The White_Space property (what \s matches in Oniguruma and Python's regex module).
bool white_space(char32_t c);

/// The code points of `text`, and where each starts (one more offset: text.size()).
struct DecodedText {
  std::vector<char32_t> points;
  std::vector<uint32_t> offsets;
};
DecodedText decode_utf8(std::string_view text);

/// The offset of the first byte of `text` that is not part of well-formed UTF-8, or -1 when it
/// is all UTF-8.
int64_t first_stray_byte(std::string_view text);

/// The UTF-8 of c.
void append_utf8(char32_t c, std::string* out);

}  // namespace vescale::unicode
