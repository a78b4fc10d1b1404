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

}  // namespace vescale
