// A chat template of our own: how a conversation becomes text for supervised fine-tuning (`data
// prepare --sft --template FILE`) and how `generate --template FILE` asks a question.
//
// NOTE [Chat template]
// The file is TOML: a table per role, [system], [user] and [assistant], each with the strings
// that go `before` and `after` that role's content (configs/templates/: Llama 3's and ChatML).
//   [user]
//   before = "<|im_start|>user\n"
//   after = "<|im_end|>\n"
// A message renders as before + content + after, the messages in order; the tokenizer's document
// start (its BOS, NOTE [Document start]) comes first and its end-of-text last, as for any
// document. Each piece is encoded on its own, so the tokens of a message's content are known
// exactly: the loss mask is 1 on the assistant's content and its `after` (the end token the
// model must learn to say), and on the end-of-text when the assistant speaks last; 0 on
// everything else (the BOS, every `before`, the other roles' messages). {"prompt", "response"}
// is a user message and the assistant's. `generate` renders its prompt as a user message and
// the assistant's `before`, and stops where the model says the assistant's `after`.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace vescale {

/// A piece of a rendered conversation, and whether its tokens are trained on.
struct ChatSegment {
  std::string text;
  bool trained = false;
};

/// One message of a conversation.
struct ChatMessage {
  std::string role;  ///< "system", "user" or "assistant"
  std::string content;
};

class ChatTemplate {
 public:
  /// Reads `path`; a UserError names the file and the key for a missing or bad one.
  static ChatTemplate load(const std::string& path);

  /// Whether the template has a table for `role`.
  bool has_role(const std::string& role) const { return roles_.count(role) > 0; }
  /// The segments of `messages` (NOTE [Chat template]); throws UserError for a role the template
  /// has no table for.
  std::vector<ChatSegment> render(const std::vector<ChatMessage>& messages) const;
  /// A user message of `prompt` and the assistant's `before`, the pieces encoded one by one as
  /// data prepare encodes them: what generate continues.
  std::vector<std::string> question(const std::string& prompt) const;
  /// The assistant's `after`: where generate stops.
  const std::string& answer_end() const;
  /// The file it came from.
  const std::string& source() const { return source_; }
  /// Every string, by "role.before" and "role.after": what meta.json records of the template
  /// data prepare --sft rendered with, and generate --template is checked against.
  std::map<std::string, std::string> strings() const;

 private:
  struct Role {
    std::string before, after;
  };
  std::map<std::string, Role> roles_;
  std::string source_;
};

}  // namespace vescale
