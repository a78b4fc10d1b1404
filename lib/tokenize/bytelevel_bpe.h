// Hugging Face tokenizer.json files of the byte-level BPE kind: GPT-2, Llama 3, Qwen and the like.
//
// NOTE [Byte-level BPE]
// Written against the tokenizer.json format, for the files whose model is "BPE" over GPT-2's byte
// alphabet (each byte a printable character, bytes_to_unicode), as Hugging Face tokenizers
// encodes them with add_special_tokens=False:
// - added tokens first: their text is matched leftmost-longest (those with normalized=false,
//   then the others in what is left), honouring lstrip and rstrip; each match is its id;
// - the text between them is pre-tokenized: the Split pre-tokenizers of a Sequence in order
//   ("Isolated": a match is a piece, and so is the text between matches), then ByteLevel
//   (add_prefix_space, and GPT-2's regex where use_regex), with our own regex matcher (NOTE
//   [Pre-tokenizer regex]);
// - each piece's bytes become byte characters; with ignore_merges a piece that is a whole vocab
//   entry is that entry; otherwise merges apply by rank, the lowest first, leftmost on ties;
// - decoding maps the characters back to bytes (added tokens are their text, <0xXX> its byte
//   where byte_fallback is set).
// Text that is not UTF-8 reads byte by byte (unicode::kStrayByteBase), so every byte string
// encodes and, without add_prefix_space or stripping tokens, decodes back to itself.
// Anything else — another model type, a normalizer, another pre-tokenizer, a Split that is not
// "Isolated", single_word tokens, dropout, subword prefixes — is refused in one line naming the
// key. Of the post-processor, the special tokens a TemplateProcessing puts before the text are
// the document start (NOTE [Document start]); other post-processors are not applied. The
// end-of-text token is tokenizer_config.json's eos_token where that file sits beside, else the
// first token named <|endoftext|>, <|end_of_text|>, </s> or <|im_end|>. Identity: "hf-bpe
// crc32c:<hex>".
#pragma once

#include <memory>
#include <string>

#include "tokenize/tokenizer.h"

namespace vescale {

/// The tokenizer.json at `path`; throws UserError naming the file and the key it cannot take.
std::unique_ptr<Tokenizer> open_bytelevel_bpe(const std::string& path);

}  // namespace vescale
