// The tokenizer_config.json Hugging Face keeps beside a tokenizer file: which tokens end and begin
// a text (NOTE [Document start]).
#pragma once

#include <string>

namespace vescale {

/// What tokenizer_config.json says of the special tokens; empty where it is absent or silent.
struct TokenizerConfig {
  std::string path;       ///< the file read, or "" where there is none
  std::string eos_token;  ///< its content ("</s>"), from a string or {"content": ...}
  std::string bos_token;
  bool add_bos_token = false;  ///< the tokenizer begins each text with bos_token
};

/// The tokenizer_config.json in the folder of `tokenizer_path`. Throws UserError naming the file
/// when it is not JSON or a key has the wrong type.
TokenizerConfig read_tokenizer_config(const std::string& tokenizer_path);

}  // namespace vescale
