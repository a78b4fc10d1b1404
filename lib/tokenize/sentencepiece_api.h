// The table of functions the SentencePiece plugin exports (NOTE [SentencePiece plugin]): what
// lib/tokenize/sentencepiece_tokenizer.cpp calls and plugins/sentencepiece/plugin.cpp defines.
//
// NOTE [SentencePiece plugin]
// Debian's libsentencepiece carries its own copy of protobuf-lite, with its symbols exported,
// and Debian's LibTorch loads libprotobuf: linked into one program, the two copies' symbols
// interpose and the program crashes as it loads (protobuf's static initialisers call the other
// copy). So SentencePiece lives in a plugin, libvescale_sentencepiece.so beside the executable,
// which the program dlopens with RTLD_LOCAL | RTLD_DEEPBIND: the plugin and the library it links
// resolve their symbols in their own scope first, and the program never sees them. Both sides
// share libstdc++, so the table passes std types.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace vescale {

struct SentencePieceApi {
  static constexpr int kVersion = 3;
  int version;
  /// A processor of the serialized model `model`; null with `error` set when it is none.
  void* (*load)(const std::string& model, std::string* error);
  void (*release)(void* processor);
  bool (*encode)(const void* processor, std::string_view text, std::vector<int>* ids,
                 std::string* error);
  bool (*decode)(const void* processor, const std::vector<int>& ids, std::string* text,
                 std::string* error);
  int (*piece_size)(const void* processor);
  int (*eos_id)(const void* processor);
  /// The piece of `id` (SentencePiece's spelling: U+2581 for a space).
  std::string (*piece)(const void* processor, int id);
  /// The score of `id`: a BPE model's are its merge ranks negated, whole numbers.
  float (*score)(const void* processor, int id);
  /// SentencePieceTrainer::Train(args) into `model` (serialized).
  bool (*train)(const std::unordered_map<std::string, std::string>& args, std::string* model,
                std::string* error);
};

}  // namespace vescale

/// The plugin's one exported symbol.
extern "C" const vescale::SentencePieceApi* vescale_sentencepiece_api();
