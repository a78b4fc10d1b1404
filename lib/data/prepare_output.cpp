#include "data/prepare_output.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/error.h"
#include "core/input_file.h"
#include "core/safe_files.h"
#include "data/streaming_encoder.h"

namespace vescale::detail {
namespace {

namespace fs = std::filesystem;

/// Moves the last `count` tokens (of `width` bytes) of `from` into the new file `to`, and cuts
/// them off `from`.
void split_tail(const fs::path& from, const fs::path& to, int64_t count, size_t width) {
  const auto total = static_cast<int64_t>(fs::file_size(from));
  const int64_t keep = total - count * static_cast<int64_t>(width);
  std::ifstream in(from, std::ios::binary);
  std::ofstream out(to, std::ios::binary | std::ios::trunc);
  in.seekg(keep);
  std::vector<char> buffer(std::size_t{1} << 22);
  for (int64_t left = total - keep; left > 0;) {
    const auto chunk =
        static_cast<std::streamsize>(std::min<int64_t>(left, static_cast<int64_t>(buffer.size())));
    in.read(buffer.data(), chunk);
    out.write(buffer.data(), chunk);
    left -= chunk;
  }
  out.close();
  VS_USER_CHECK(in.good() && out.good(), "data prepare: writing {} failed: {}", to.string(),
                std::strerror(errno));
  fs::resize_file(from, static_cast<uintmax_t>(keep));
}

/// Whether `meta` is the meta.json a prepare of ours writes (token_meta's keys).
bool prepared_here(const fs::path& meta) {
  const nlohmann::json j = nlohmann::json::parse(read_input_file(meta.string(), "meta.json"));
  for (const char* key : {"vocab_size", "dtype", "tokenizer", "train_tokens", "val_tokens"}) {
    if (!j.is_object() || !j.contains(key)) return false;
  }
  return true;
}

/// The output folder while a prepare writes it: none of its outputs an input, nor a file
/// another tool wrote (a nanoGPT folder's train.bin: no meta.json of ours beside it) unless
/// --overwrite; made with its missing parents; locked against a second prepare into it (whose
/// renames would replace this one's files after it reported them); and removed again with the
/// parents it made when the prepare stops before its files are committed.
const LockUse kPrepareLock{
    ".prepare.lock", "data prepare", "another data prepare",
    "two prepares must not write one folder (the later one's files would replace those the "
    "first reported). Wait for it to end, or name another -o",
    /*remove=*/true};

/// The example starts at or past `train_tokens` of `train` moved into `val`, as offsets there.
void split_starts(const fs::path& train, const fs::path& val, int64_t train_tokens) {
  std::vector<uint64_t> starts(fs::file_size(train) / sizeof(uint64_t));
  {
    std::ifstream in(train, std::ios::binary);
    in.read(reinterpret_cast<char*>(starts.data()),
            static_cast<std::streamsize>(starts.size() * sizeof(uint64_t)));
    VS_USER_CHECK(in.good(), "data prepare: reading {} failed", train.string());
  }
  const auto first_val =
      std::lower_bound(starts.begin(), starts.end(), static_cast<uint64_t>(train_tokens));
  std::vector<uint64_t> in_val(first_val, starts.end());
  for (uint64_t& s : in_val)
    s -= static_cast<uint64_t>(train_tokens);
  starts.erase(first_val, starts.end());
  std::ofstream t(train, std::ios::binary | std::ios::trunc), v(val, std::ios::binary);
  write_values<uint64_t>(t, starts);
  write_values<uint64_t>(v, in_val);
  VS_USER_CHECK(t.good() && v.good(), "data prepare: writing {} failed: {}", val.string(),
                std::strerror(errno));
}

}  // namespace

std::vector<std::string> output_names(bool sft) {
  std::vector<std::string> out{"train.bin", "val.bin"};
  if (sft)
    for (const char* name : {"train.mask.bin", "val.mask.bin", "train.docs.bin", "val.docs.bin"})
      out.emplace_back(name);
  return out;
}

fs::path partial_path(const fs::path& folder, const std::string& name) {
  return folder / (name + ".partial");
}

OutputFolder::OutputFolder(const PrepareOptions& o) : path_(o.output) {
  std::vector<std::string> inputs = o.files;
  inputs.push_back(o.tokenizer);
  if (!o.chat_template.empty()) inputs.push_back(o.chat_template);
  std::vector<std::string> names = output_names(true);
  names.emplace_back("meta.json");
  for (const std::string& name : names)
    refuse_writing_over_inputs(path_ / name, inputs, "data prepare");
  for (const std::string& name : names) {
    refuse_replacing_foreign(
        path_ / name, o.overwrite,
        [this](const fs::path&) { return prepared_here(path_ / "meta.json"); }, "data prepare -o",
        "a token file of a data prepare (no meta.json of ours beside it: another tool's?)");
  }
  std::error_code ec;
  VS_USER_CHECK(!fs::exists(path_, ec) || fs::is_directory(path_, ec),
                "data prepare -o {}: a file, not a folder; name the folder to write", o.output);
  for (fs::path p = fs::absolute(path_, ec); !p.empty() && !fs::exists(p, ec); p = p.parent_path())
    made_.push_back(p);
  fs::create_directories(path_, ec);
  VS_USER_CHECK(!ec, "data prepare -o {}: cannot create the folder: {}", o.output, ec.message());
  try {
    lock_ = FolderLock(path_, kPrepareLock);
  } catch (...) {
    remove_made();
    throw;
  }
}

OutputFolder::~OutputFolder() {
  remove_made();
}  // the lock goes in any case

void OutputFolder::remove_made() {
  lock_ = FolderLock();
  std::error_code ec;
  for (const fs::path& p : made_)
    fs::remove(p, ec);  // a folder that holds anything stays
  made_.clear();
}

PartialsOnStopSignal::PartialsOnStopSignal(const std::vector<fs::path>& paths) {
  for (const fs::path& p : paths)
    partials().push_back(p.string());  // all of them before any handler can run
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  for (size_t i = 0; i < kSignals.size(); ++i)
    ::sigaction(kSignals[i], &action, &old_[i]);
}

PartialsOnStopSignal::~PartialsOnStopSignal() {
  for (size_t i = 0; i < kSignals.size(); ++i)
    ::sigaction(kSignals[i], &old_[i], nullptr);
  partials().clear();
}

std::vector<std::string>& PartialsOnStopSignal::partials() {
  static std::vector<std::string> paths;
  return paths;
}
void PartialsOnStopSignal::on_signal(int sig) {
  for (const std::string& p : partials())
    ::unlink(p.c_str());
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

nlohmann::json token_meta(const PrepareSummary& sum, const PrepareOptions& o,
                          const Tokenizer& tokenizer, const ChatTemplate* chat) {
  nlohmann::json meta = {{"vocab_size", sum.vocab_size}, {"dtype", sum.dtype},
                         {"tokenizer", sum.tokenizer},   {"tokenizer_path", o.tokenizer},
                         {"documents", sum.documents},   {"train_tokens", sum.train_tokens},
                         {"val_tokens", sum.val_tokens}};
  const auto eot = tokenizer.end_of_text();
  meta["end_of_text"] = eot ? nlohmann::json(*eot) : nlohmann::json(nullptr);
  meta["document_start"] = tokenizer.document_start();
  if (o.sft) {
    meta["mask"] = true;
    meta["chat_template"] = o.chat_template;
    meta["chat_template_strings"] = chat->strings();
    meta["trained_tokens"] = sum.trained_tokens;
  }
  return meta;
}

void commit_token_files(const fs::path& folder, const nlohmann::json& meta, bool sft,
                        RemovePartials& partials) {
  const fs::path meta_tmp = partial_path(folder, "meta.json");
  {
    std::ofstream m(meta_tmp, std::ios::trunc);
    m << meta.dump(2) << "\n";
    VS_USER_CHECK(m.good(), "data prepare: writing {} failed: {}", meta_tmp.string(),
                  std::strerror(errno));
  }
  partials.paths.clear();
  for (const std::string& name : output_names(sft))
    partials.paths.push_back(partial_path(folder, name));
  std::error_code ec;
  fs::remove(folder / "meta.json", ec);
  VS_USER_CHECK(!ec, "data prepare: cannot replace {}: {}", (folder / "meta.json").string(),
                ec.message());
  for (const std::string& name : output_names(true))
    if (!sft) fs::remove(folder / name, ec);
  const auto rename = [](const fs::path& from, const fs::path& to) {
    std::error_code error;
    fs::rename(from, to, error);
    VS_USER_CHECK(!error, "data prepare: cannot rename {} to {}: {}", from.string(), to.string(),
                  error.message());
  };
  for (const std::string& name : output_names(sft))
    rename(partial_path(folder, name), folder / name);
  rename(meta_tmp, folder / "meta.json");
}

void split_outputs(const fs::path& folder, const PrepareOptions& o, const EncodedTotals& e,
                   bool wide, PrepareSummary& sum) {
  const int64_t tokens = e.tokens;
  sum.documents = e.documents;
  sum.chunks = e.chunks;
  sum.text_bytes = e.text_bytes;
  sum.bad_lines = e.bad_lines;
  sum.first_bad_line = e.first_bad_line;
  sum.trained_tokens = e.trained;
  VS_USER_CHECK(sum.documents > 0, "data prepare: {} hold{} no document", fmt::join(o.files, ", "),
                o.files.size() == 1 ? "s" : "");
  sum.val_tokens = static_cast<int64_t>(static_cast<double>(tokens) * o.val_fraction);
  sum.train_tokens = tokens - sum.val_tokens;
  VS_USER_CHECK(sum.val_tokens >= 2 && sum.train_tokens >= 2,
                "data prepare: {} tokens are too few to split {:g} of them off as val.bin", tokens,
                o.val_fraction);
  const auto partial = [&folder](const char* name) { return partial_path(folder, name); };
  split_tail(partial("train.bin"), partial("val.bin"), sum.val_tokens, wide ? 4 : 2);
  if (!o.sft) return;
  split_tail(partial("train.mask.bin"), partial("val.mask.bin"), sum.val_tokens, 1);
  split_starts(partial("train.docs.bin"), partial("val.docs.bin"), sum.train_tokens);
}

}  // namespace vescale::detail
