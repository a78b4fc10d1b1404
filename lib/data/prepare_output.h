// The output side of `data prepare` (NOTE [Token files]): the folder it writes (checked, made,
// locked, removed again on failure), its partial files (removed on a stop signal), the val split
// cut off the stream's tail, and the renames that commit the files with their meta.json.
#pragma once

#include <array>
#include <csignal>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/folder_lock.h"
#include "data/chat_template.h"
#include "data/prepare_tokens.h"
#include "data/streaming_encoder.h"
#include "tokenize/tokenizer.h"

namespace vescale::detail {

/// The files a prepare writes: the splits' tokens and meta.json; under --sft each split's mask
/// and example starts.
std::vector<std::string> output_names(bool sft);
/// Where file `name` of `folder` is written until the commit renames it: "<name>.partial".
std::filesystem::path partial_path(const std::filesystem::path& folder, const std::string& name);

/// The output folder while a prepare writes it: none of its outputs an input, nor a file
/// another tool wrote (a nanoGPT folder's train.bin: no meta.json of ours beside it) unless
/// --overwrite; made with its missing parents; locked against a second prepare into it (whose
/// renames would replace this one's files after it reported them); and removed again with the
/// parents it made when the prepare stops before its files are committed.
class OutputFolder {
 public:
  explicit OutputFolder(const PrepareOptions& o);
  OutputFolder(const OutputFolder&) = delete;
  OutputFolder& operator=(const OutputFolder&) = delete;
  ~OutputFolder();

  const std::filesystem::path& path() const { return path_; }
  /// The prepare's files are in place: the folder stays.
  void keep() { made_.clear(); }

 private:
  /// The folders it made, deepest first, once its lock (and lock file) is gone: each only if
  /// nothing else is in it.
  void remove_made();

  std::filesystem::path path_;
  std::vector<std::filesystem::path> made_;  ///< the folders it made, deepest first
  FolderLock lock_;
};

/// Removes its files when it goes, unless they were renamed first: whatever stops prepare_tokens
/// early (a refusal, a failed write) takes the partials with it.
struct RemovePartials {
  std::vector<std::filesystem::path> paths;
  ~RemovePartials() {
    std::error_code ec;
    for (const std::filesystem::path& p : paths)
      std::filesystem::remove(p, ec);
  }
};

/// NOTE [Partials on a stop signal]: while a prepare encodes, a stop signal (SIGINT, SIGTERM, a
/// closed terminal's SIGHUP) removes its partial files (unlink is async-signal-safe), then ends
/// the process with the signal's own action, as it would have. Not while the files are renamed
/// into place: commit_token_files keeps its partial meta.json on purpose.
class PartialsOnStopSignal {
 public:
  explicit PartialsOnStopSignal(const std::vector<std::filesystem::path>& paths);
  PartialsOnStopSignal(const PartialsOnStopSignal&) = delete;
  PartialsOnStopSignal& operator=(const PartialsOnStopSignal&) = delete;
  ~PartialsOnStopSignal();

 private:
  static constexpr std::array<int, 3> kSignals{SIGINT, SIGTERM, SIGHUP};
  static std::vector<std::string>& partials();
  static void on_signal(int sig);
  std::array<struct sigaction, 3> old_{};
};

/// meta.json's contents for `sum`, the tokenizer and under --sft the chat template.
nlohmann::json token_meta(const PrepareSummary& sum, const PrepareOptions& o,
                          const Tokenizer& tokenizer, const ChatTemplate* chat);

/// The new files in place of the old (NOTE [Token files]): meta.json.partial is written first,
/// the old meta.json goes next and the new one comes last; from the removal on, the partial
/// stays if this stops (a failed rename, a SIGKILL), and train refuses a folder that holds it.
/// So no folder stopped between the renames is read as one run's tokens at another run's width.
/// An earlier prepare's mask and starts go too when this one writes none.
void commit_token_files(const std::filesystem::path& folder, const nlohmann::json& meta, bool sft,
                        RemovePartials& partials);

/// The encoder's totals and the stream's split into `sum`; the tail of each file moved into
/// the val split's.
void split_outputs(const std::filesystem::path& folder, const PrepareOptions& o,
                   const EncodedTotals& e, bool wide, PrepareSummary& sum);

}  // namespace vescale::detail
