#include "tokenize/unicode.h"

#include <algorithm>
#include <array>

namespace vescale::unicode {

namespace {

/// The category of c, by a search of the runs.
Category search_category(char32_t c) {
  const auto* run = std::upper_bound(kCategoryRuns, kCategoryRuns + kCategoryRunCount, c,
                                     [](char32_t x, const CategoryRun& r) { return x < r.start; });
  return static_cast<Category>((run - 1)->category);
}

}  // namespace

Category category(char32_t c) {
  if (c < 0x80) {  // ASCII, without the search
    static const auto ascii = [] {
      std::array<Category, 128> t{};
      for (char32_t a = 0; a < 128; ++a)
        t[a] = search_category(a);
      return t;
    }();
    return ascii[c];
  }
  return c > 0x10FFFF ? kCn : search_category(c);
}

char32_t fold(char32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z' ? c + 32 : c;
  const auto* f = std::lower_bound(kCaseFolds, kCaseFolds + kCaseFoldCount, c,
                                   [](const CaseFold& r, char32_t x) { return r.from < x; });
  return f != kCaseFolds + kCaseFoldCount && f->from == c ? f->to : c;
}

bool white_space(char32_t c) {
  if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || c == 0x20;
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

namespace {

/// The length of the well-formed UTF-8 sequence at text[i] (Unicode's table 3-7), 0 if none.
int sequence_length(std::string_view text, size_t i, char32_t* point) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b0 = byte(i);
  const size_t left = text.size() - i;
  const auto cont = [&](size_t k, unsigned char lo = 0x80, unsigned char hi = 0xBF) {
    return k < text.size() && byte(k) >= lo && byte(k) <= hi;
  };
  if (b0 < 0x80) {
    *point = b0;
    return 1;
  }
  if (b0 >= 0xC2 && b0 <= 0xDF && left >= 2 && cont(i + 1)) {
    *point = (char32_t{b0} & 0x1F) << 6 | (byte(i + 1) & 0x3F);
    return 2;
  }
  if (b0 >= 0xE0 && b0 <= 0xEF && left >= 3) {
    const unsigned char lo = b0 == 0xE0 ? 0xA0 : 0x80, hi = b0 == 0xED ? 0x9F : 0xBF;
    if (cont(i + 1, lo, hi) && cont(i + 2)) {
      *point =
          (char32_t{b0} & 0x0F) << 12 | (char32_t{byte(i + 1)} & 0x3F) << 6 | (byte(i + 2) & 0x3F);
      return 3;
    }
  }
  if (b0 >= 0xF0 && b0 <= 0xF4 && left >= 4) {
    const unsigned char lo = b0 == 0xF0 ? 0x90 : 0x80, hi = b0 == 0xF4 ? 0x8F : 0xBF;
    if (cont(i + 1, lo, hi) && cont(i + 2) && cont(i + 3)) {
      *point = (char32_t{b0} & 0x07) << 18 | (char32_t{byte(i + 1)} & 0x3F) << 12 |
               (char32_t{byte(i + 2)} & 0x3F) << 6 | (byte(i + 3) & 0x3F);
      return 4;
    }
  }
  return 0;
}

}  // namespace

DecodedText decode_utf8(std::string_view text) {
  DecodedText d;
  d.points.reserve(text.size());
  d.offsets.reserve(text.size() + 1);
  for (size_t i = 0; i < text.size();) {
    char32_t point = 0;
    int n = sequence_length(text, i, &point);
    if (n == 0) {
      point = kStrayByteBase + static_cast<unsigned char>(text[i]);
      n = 1;
    }
    d.points.push_back(point);
    d.offsets.push_back(static_cast<uint32_t>(i));
    i += static_cast<size_t>(n);
  }
  d.offsets.push_back(static_cast<uint32_t>(text.size()));
  return d;
}

int64_t first_stray_byte(std::string_view text) {
  char32_t point = 0;
  for (size_t i = 0; i < text.size();) {
    const int n = sequence_length(text, i, &point);
    if (n == 0) return static_cast<int64_t>(i);
    i += static_cast<size_t>(n);
  }
  return -1;
}

void append_utf8(char32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

}  // namespace vescale::unicode
