// What `data prepare` takes from one line of a JSON-lines corpus.
//
// NOTE [JSON-lines corpora]
// A `.jsonl` file (or `.jsonl.gz`, `.jsonl.zst`, decompressed as it is read: data/byte_source.h)
// holds one document a line: a JSON object whose string field --field (default "text") is the
// document's text, which becomes its tokens exactly as a text file of that text would (the
// document start, the text, the end-of-text: NOTE [Token files]), so a corpus gives the same
// token files whichever of the formats it ships in. Under --sft a line is a fine-tuning
// example instead, {"prompt": ..., "response": ...} or {"messages": [{"role", "content"}, ...]},
// rendered by a chat template with its loss mask (NOTE [Chat template]). Blank lines are
// skipped. A line that is not JSON, not an object, lacks the field or holds another type there
// stops the command with its file:line and nothing written, unless --skip-bad-lines counts it
// and goes on.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "data/chat_template.h"

namespace vescale {

struct LineReading {
  std::string field = "text";          ///< a document's field
  const ChatTemplate* chat = nullptr;  ///< --sft: examples rendered by it
};

/// The segments of one line into `out`: its document (one trained segment) or its rendered
/// example. False with the reason in `why` ("not JSON: ...", "no field \"text\"", ...).
bool read_json_line(std::string_view line, const LineReading& how, std::vector<ChatSegment>& out,
                    std::string& why);

/// Whether a line holds only JSON whitespace (or nothing).
bool blank_line(std::string_view line);

}  // namespace vescale
