// SentencePiece models through Debian's libsentencepiece, in a plugin the program loads (NOTE
// [SentencePiece plugin]). Without the plugin (a build without libsentencepiece-dev) they are
// refused in one line.
#pragma once

#include <memory>
#include <string>

#include "tokenize/tokenizer.h"

namespace vescale {

/// The SentencePiece model file at `path`; throws UserError naming it when it is not one.
std::unique_ptr<Tokenizer> open_sentencepiece(const std::string& path);

struct SentencePieceApi;
/// The plugin's table, loaded once (NOTE [SentencePiece plugin]); never null: a UserError that
/// starts with `what` when the plugin is missing or not ours. (A pointer: GCC 14 takes a
/// reference returned beside a temporary argument for a dangling one.)
const SentencePieceApi* require_sentencepiece_plugin(const std::string& what);

}  // namespace vescale
