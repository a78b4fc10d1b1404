// The tokenizer a job names for its tokens (data.tokenizer), checked against the data and the
// model before the first step or token.
//
// NOTE [The data's tokenizer]
// data.tokenizer names the tokenizer of the tokens a job trains on; generate encodes its prompt
// and decodes its tokens with it. It was never checked: a missing file trained, a tokenizer other
// than the one data prepare used was taken (generate printed another vocabulary's text), and with
// data.source = "text" the key was ignored. Now the preflight (train, plan lint, plan auto) and
// generate open it and refuse, in one line naming the config and the file:
// - a path that is not a tokenizer (missing, unreadable, not a model);
// - any tokenizer but "bytes" for data.source = "text" (its tokens are the text's bytes);
// - for data.source = "tokens", a tokenizer other than the one meta.json records (its identity:
//   kind and CRC-32C of the file, written by data prepare);
// - more ids than the model's vocabulary. Fewer are fine (a padded vocabulary): generate then
//   samples only ids the tokenizer has.
#pragma once

#include <memory>

#include "config/job_config.h"
#include "tokenize/tokenizer.h"

namespace vescale {

/// data.tokenizer opened and checked (NOTE [The data's tokenizer]); null when the key is empty.
/// Throws UserError naming the config and the file.
std::unique_ptr<Tokenizer> open_data_tokenizer(const JobConfig& config);

}  // namespace vescale
