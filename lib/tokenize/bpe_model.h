// What a byte-level BPE tokenizer.json holds, as the tables the encoder (bytelevel_bpe.cpp) uses:
// read by bpe_model_reader.cpp (NOTE [Byte-level BPE]).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenize/regex.h"

namespace vescale::detail {

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool lstrip = false, rstrip = false, normalized = false;
};

struct BpeModel {
  struct Merge {
    int32_t rank, id;
  };

  std::string path, identity;              ///< identity: "hf-bpe crc32c:<hex>"
  std::array<std::string, 256> byte_text;  ///< each byte's character, UTF-8
  std::array<int32_t, 256> byte_id{};
  std::array<int32_t, 256> byte_fallback = [] {
    std::array<int32_t, 256> a{};
    a.fill(-1);
    return a;
  }();
  std::unordered_map<std::string, int32_t> vocab;
  std::unordered_map<uint64_t, Merge> merges;  ///< by pair_key of the two ids
  std::vector<std::string> id_bytes;           ///< what each id decodes to
  std::vector<bool> has_id;
  std::vector<AddedToken> added[2];  ///< [0]: matched before normalization, [1]: after
  std::vector<Regex> splits;         ///< the pre-tokenizer's, in order
  bool add_prefix_space = false, ignore_merges = false, strip_tokens = false;
  size_t longest_added = 0;
  std::optional<int64_t> end_of_text;
  std::vector<int64_t> start;  ///< NOTE [Document start]

  /// An id of the vocabulary or the added tokens.
  bool known(int64_t id) const {
    return id >= 0 && id < static_cast<int64_t>(id_bytes.size()) && has_id[static_cast<size_t>(id)];
  }
  static uint64_t pair_key(int32_t a, int32_t b) {
    return static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32 | static_cast<uint32_t>(b);
  }
};

/// The tokenizer.json `bytes` read from `path`; throws UserError naming the file and the key it
/// cannot take.
BpeModel read_bpe_model(const std::string& path, const std::string& bytes);

}  // namespace vescale::detail
