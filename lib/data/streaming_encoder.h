// The streaming encode of `data prepare` (NOTE [Token files]): a reader thread cuts the files
// into chunks where the tokenizer can cut (JSON lines: between lines), workers encode them, and
// the calling thread writes them in order, at most 2 x threads chunks in memory at once.
#pragma once

#include <cstdint>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "data/chat_template.h"
#include "data/prepare_tokens.h"
#include "tokenize/tokenizer.h"

namespace vescale::detail {

/// The files a prepare writes a split into: its tokens and, under --sft, mask and starts.
struct SplitFiles {
  std::ofstream tokens, mask, starts;
};

/// What the streaming encode wrote.
struct EncodedTotals {
  int64_t tokens = 0, documents = 0, chunks = 0, text_bytes = 0, bad_lines = 0, trained = 0;
  std::string first_bad_line;  ///< "file:line: why" of the first line skipped
};

/// Encodes every file of `o` into `out` (`corpus`: the files' bytes, for progress lines), each
/// token `wide` (uint32) or not (uint16); rethrows the first failure of any thread after stopping
/// and joining them all.
EncodedTotals encode_files(const PrepareOptions& o, const Tokenizer& tokenizer,
                           const ChatTemplate* chat, int64_t corpus,
                           const std::function<void(const std::string&)>& progress, SplitFiles& out,
                           bool wide);

/// Appends `values` to `out` as T.
template <typename T, typename V>
void write_values(std::ofstream& out, const std::vector<V>& values) {
  std::vector<T> narrow(values.begin(), values.end());
  out.write(reinterpret_cast<const char*>(narrow.data()),
            static_cast<std::streamsize>(narrow.size() * sizeof(T)));
}

}  // namespace vescale::detail
