// `vescale-train generate CONFIG.toml --checkpoint PATH [--prompt TEXT ...]`: text sampled from a
// checkpoint on the config's mesh (lib/generate/).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include "commands/commands.h"
#include "commands/job_launch.h"
#include "commands/validators.h"
#include "config/memory_estimate.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/logging.h"
#include "core/units.h"
#include "data/chat_template.h"
#include "data/token_data.h"
#include "generate/generator.h"
#include "hf/import.h"
#include "runtime.h"
#include "tokenize/tokenizer.h"
#include "train/checkpointing.h"
#include "train/data_tokenizer.h"

namespace vescale::app {
namespace {

struct GenerateCommandOptions {
  std::string config, checkpoint, prompt, prompt_file, prompt_ids;
  std::string chat_template;  ///< --template: the prompt asked as a chat's question
  /// Which of --prompt, --prompt-file, --prompt-ids the command line gave (even empty).
  bool prompt_given = false, prompt_file_given = false, prompt_ids_given = false;
  GenerateOptions run;
  bool no_cache = false;
};

/// The tokenizer of the model's tokens (NOTE [Tokenizers]): data.tokenizer; else bytes for a
/// text model (data.source = "text"), as the data pipeline reads them; else the tokenizer.json or
/// tokenizer.model a Hugging Face folder `checkpoint` carries; else none (ids in, ids out).
std::unique_ptr<Tokenizer> tokenizer_of(const JobConfig& c, const std::string& checkpoint) {
  std::unique_ptr<Tokenizer> t;
  if (!c.data_tokenizer.empty()) {
    t = open_data_tokenizer(c);  // NOTE [The data's tokenizer]
  } else if (c.data_source == DataSource::kText) {
    t = open_tokenizer("bytes");
  } else if (hf::is_hf_path(checkpoint)) {
    const std::filesystem::path folder = hf::hf_folder(checkpoint);
    std::error_code ec;
    if (std::filesystem::exists(folder / "tokenizer.json", ec) ||
        std::filesystem::exists(folder / "tokenizer.model", ec))
      t = open_tokenizer(folder.string());
  }
  if (t) {
    const int64_t vocab = c.family().vocab_size(c.model_spec());
    VS_USER_CHECK(t->vocab_size() <= vocab,
                  "generate: tokenizer {} has {} tokens, more than the model's vocabulary of {} "
                  "({})",
                  t->identity(), t->vocab_size(), vocab, c.source);
  }
  return t;
}

std::vector<int64_t> parse_ids(const std::string& text, int64_t vocab_size) {
  std::vector<int64_t> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    int64_t id = -1;
    try {
      id = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    VS_USER_CHECK(used == item.size() && !item.empty() && id >= 0 && id < vocab_size,
                  "generate --prompt-ids: '{}' is not a token id in [0, {}) (e.g. 1,2,3)", item,
                  vocab_size);
    ids.push_back(id);
  }
  return ids;
}

/// generate --template against the template the fine-tuning data was rendered with (meta.json,
/// NOTE [Chat template]): a question asked in other strings than the model learned is refused
/// in one line naming the first string that differs, as data.tokenizer is checked.
void check_template_of_data(const GenerateCommandOptions& o, const JobConfig& c,
                            const ChatTemplate& chat) {
  if (c.data_source != DataSource::kTokens) return;
  const TokenMeta meta = read_token_meta(c.data_path);
  if (!meta.mask) return;  // not fine-tuning data: no template to match
  std::map<std::string, std::string> recorded = meta.chat_template_strings;
  std::error_code ec;
  if (recorded.empty() && !meta.chat_template.empty() &&
      std::filesystem::is_regular_file(meta.chat_template, ec))  // an older prepare: the path
    recorded = ChatTemplate::load(meta.chat_template).strings();
  if (recorded.empty()) return;
  const std::map<std::string, std::string> mine = chat.strings();
  std::map<std::string, std::string> keys = recorded;
  keys.insert(mine.begin(), mine.end());
  for (const auto& [key, unused] : keys) {
    const auto a = mine.find(key);
    const auto b = recorded.find(key);
    const std::string ours = a == mine.end() ? "absent" : nlohmann::json(a->second).dump();
    const std::string data = b == recorded.end() ? "absent" : nlohmann::json(b->second).dump();
    VS_USER_CHECK(ours == data,
                  "generate --template {}: its {} is {}, but the data in {} was rendered with {} "
                  "there ({}): ask in the template data prepare --sft used",
                  o.chat_template, key, ours, c.data_path, data,
                  meta.chat_template.empty() ? "meta.json" : meta.chat_template);
  }
}

/// The prompt's token ids from whichever of --prompt, --prompt-file, --prompt-ids was given.
std::vector<int64_t> prompt_tokens(const GenerateCommandOptions& o, const JobConfig& c,
                                   const Tokenizer* tokenizer) {
  const int given = o.prompt_given + o.prompt_file_given + o.prompt_ids_given;
  VS_USER_CHECK(given <= 1, "generate: give one of --prompt, --prompt-file, --prompt-ids");
  VS_USER_CHECK(!o.prompt_given || !o.prompt.empty(),
                "generate --prompt: the prompt is empty (leave the option out for a newline)");
  VS_USER_CHECK(!o.prompt_ids_given || !o.prompt_ids.empty(),
                "generate --prompt-ids: no token ids (e.g. 1,2,3)");
  VS_USER_CHECK(o.chat_template.empty() || !o.prompt_ids_given,
                "generate --template asks a text question: give it as --prompt or --prompt-file, "
                "not --prompt-ids");
  const int64_t vocab = c.family().vocab_size(c.model_spec());
  if (o.prompt_ids_given) return parse_ids(o.prompt_ids, vocab);
  VS_USER_CHECK(o.chat_template.empty() || tokenizer != nullptr,
                "generate --template: {} names no tokenizer to encode the question with; set "
                "data.tokenizer (or data.source = \"text\" for bytes)",
                c.source);
  if (tokenizer == nullptr) {
    VS_USER_CHECK(given == 0,
                  "generate: {} trains on data.source = \"{}\", whose tokens are ids: give the "
                  "prompt as --prompt-ids 1,2,3, or name their tokenizer in data.tokenizer",
                  c.source, config_name(c.data_source));
    return {0};
  }
  const std::string text = o.prompt_file_given ? read_input_file(o.prompt_file, "prompt file")
                           : o.prompt_given    ? o.prompt
                                               : std::string("\n");
  VS_USER_CHECK(!text.empty(), "generate --prompt-file {}: the file is empty", o.prompt_file);
  std::vector<int64_t> ids = tokenizer->document_start();  // NOTE [Document start]
  // NOTE [Chat template]: a question's pieces each encoded, as data prepare --sft encodes them.
  std::vector<std::string> pieces{text};
  if (!o.chat_template.empty()) {
    const ChatTemplate chat = ChatTemplate::load(o.chat_template);
    check_template_of_data(o, c, chat);
    pieces = chat.question(text);
  }
  const size_t before = ids.size();
  for (const std::string& piece : pieces) {
    const std::vector<int64_t> encoded = tokenizer->encode(piece);
    ids.insert(ids.end(), encoded.begin(), encoded.end());
  }
  VS_USER_CHECK(ids.size() > before, "generate: the prompt encodes to no tokens");
  // Here, in the command's own process, before any worker prints the prompt it would refuse.
  const int64_t block_size = c.model_keys.integer("block_size");
  VS_USER_CHECK(static_cast<int64_t>(ids.size()) <= block_size,
                "generate: the prompt has {} tokens; it must have 1 to model.block_size = {}",
                ids.size(), block_size);
  return ids;
}

/// Where samples end: under --template at the assistant's end and at the end-of-text.
std::vector<std::vector<int64_t>> stop_sequences(const GenerateCommandOptions& o,
                                                 const Tokenizer* tokenizer) {
  if (o.chat_template.empty() || tokenizer == nullptr) return {};
  std::vector<std::vector<int64_t>> out{
      tokenizer->encode(ChatTemplate::load(o.chat_template).answer_end())};
  if (const auto eot = tokenizer->end_of_text()) out.push_back({*eot});
  return out;
}

/// Prints a sample's text as its tokens come: the decoding of all of them so far, less what is
/// printed already (a piece may end inside a character: its U+FFFD waits for the rest). A text
/// prompt's document start (a BOS, NOTE [Document start]) is not printed.
class TextStream {
 public:
  TextStream(const Tokenizer* tokenizer, bool text_prompt)
      : tokenizer_(tokenizer),
        hidden_(tokenizer && text_prompt ? tokenizer->document_start().size() : 0) {}
  /// The new text after `tokens` more.
  std::string add(const std::vector<int64_t>& tokens) {
    if (tokenizer_ == nullptr) {
      std::string out;
      for (int64_t t : tokens)
        out += fmt::format("{} ", t);
      return out;
    }
    const size_t hide = std::min(hidden_, tokens.size());
    hidden_ -= hide;
    ids_.insert(ids_.end(), tokens.begin() + static_cast<std::ptrdiff_t>(hide), tokens.end());
    std::string text = tokenizer_->decode(ids_);
    static const std::string kReplacement = "\xef\xbf\xbd";
    if (!tokenizer_->lossless() && text.size() >= kReplacement.size() &&
        text.compare(text.size() - kReplacement.size(), kReplacement.size(), kReplacement) == 0)
      text.resize(text.size() - kReplacement.size());
    if (text.size() <= printed_.size() || text.compare(0, printed_.size(), printed_) != 0)
      return "";
    std::string out = text.substr(printed_.size());
    printed_ = std::move(text);
    return out;
  }

 private:
  const Tokenizer* tokenizer_;
  size_t hidden_;  ///< the tokens still to come that are not printed
  std::vector<int64_t> ids_;
  std::string printed_;  ///< the text printed so far
};

/// Refuses a model that makes no tokens, and samples whose KV cache and logits could not fit this
/// machine's memory (before any process starts, not as an allocation failure in one).
void check_generates(const JobConfig& c, const GenerateOptions& run) {
  const std::optional<TransformerShape> shape = c.family().transformer_shape(c.model_spec());
  VS_USER_CHECK(c.family().objective() == Objective::kNextToken && shape,
                "generate: {} has model.name = \"{}\", which predicts no tokens (generate takes a "
                "next-token model: gpt, llama)",
                c.source, c.model);
  const double rows = static_cast<double>(run.num_samples);
  const double context = static_cast<double>(c.model_keys.integer("block_size"));
  // Per sample: keys and values of every layer over the context, and float32 logits.
  const double per_sample = 2.0 * static_cast<double>(shape->n_layer) * context *
                                static_cast<double>(shape->n_embd) * compute_element_bytes(c) +
                            2.0 * static_cast<double>(shape->vocab_size) * 4.0;
  const double memory = physical_memory_bytes();
  VS_USER_CHECK(memory <= 0 || rows * per_sample <= memory,
                "generate --num-samples {}: their KV caches and logits need about {}, and this "
                "machine has {}; ask for fewer samples",
                run.num_samples, format_bytes(rows * per_sample), format_bytes(memory));
}

/// Tokens as the user reads them: their text, or ids separated by spaces without a tokenizer.
std::string render(const std::vector<int64_t>& tokens, const Tokenizer* tokenizer,
                   bool text_prompt) {
  return TextStream(tokenizer, text_prompt).add(tokens);
}

void print_now(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

/// "[generate] 4 prompt tokens, 200 new tokens in each of 1 sample(s), 0.16 s: ..." for stderr.
std::string summary_line(size_t prompt_tokens, const GenerateOptions& run, const Generation& g,
                         double early_s, double late_s) {
  // Samples that stopped early (--template) made fewer than --max-new-tokens.
  size_t made = 0;
  for (const std::vector<int64_t>& sample : g.tokens)
    made = std::max(made, sample.size());
  const double after_first =
      static_cast<double>(g.step_s.size() - 1) * static_cast<double>(run.num_samples);
  return fmt::format(
      "[generate] {} prompt tokens, {} new tokens in each of {} sample(s), {:.2f} s: {:.1f} "
      "tokens/s after the first; time to first token {:.3f} s; {:.2f} ms a step in the first "
      "quarter, {:.2f} ms in the last; KV cache {} ({:.1f} MiB on rank 0), {} context restarts",
      prompt_tokens, made, run.num_samples, g.total_s,
      after_first / std::max(1e-9, g.total_s - g.first_token_s), g.first_token_s, early_s * 1e3,
      late_s * 1e3, run.use_cache ? "on" : "off", static_cast<double>(g.cache_bytes) / (1 << 20),
      g.restarts);
}

/// Rank 0's output: the prompt and, for one sample, each token as it comes; for several, each
/// sample after the last step. The summary goes to standard error.
int run_generate(const GenerateCommandOptions& o, const JobConfig& config, const std::string& path,
                 const LaunchEnv& env) {
  ParallelModel model(config, connect_job(config, env), JobPurpose::kEvaluate);
  log_rank0("{}; generating (no optimizer)", model.description());
  load_model(model, path);
  const std::unique_ptr<Tokenizer> tokenizer = tokenizer_of(config, path);
  const std::vector<int64_t> prompt = prompt_tokens(o, config, tokenizer.get());
  const bool rank0 = env.rank == 0;
  const bool stream = o.run.num_samples == 1;
  const bool text_prompt = !o.prompt_ids_given;
  TextStream text(tokenizer.get(), text_prompt);
  if (rank0 && stream) print_now(text.add(prompt));
  GenerateOptions run = o.run;
  run.use_cache = !o.no_cache;
  run.stops = stop_sequences(o, tokenizer.get());
  if (tokenizer) run.sampling.vocab_limit = tokenizer->vocab_size();
  const Generation g = generate(model, prompt, run, [&](int64_t, const std::vector<int64_t>& t) {
    if (rank0 && stream) print_now(text.add({t[0]}));
  });
  if (!rank0) return 0;
  if (stream) print_now("\n");
  for (size_t k = 0; !stream && k < g.tokens.size(); ++k) {
    std::vector<int64_t> all = prompt;
    all.insert(all.end(), g.tokens[k].begin(), g.tokens[k].end());
    print_now(fmt::format("---------- sample {} ----------\n{}\n", k + 1,
                          render(all, tokenizer.get(), text_prompt)));
  }
  const auto [early, late] = g.early_late_step_s();
  std::fprintf(stderr, "%s\n", summary_line(prompt.size(), run, g, early, late).c_str());
  return 0;
}

}  // namespace

void add_generate_command(CLI::App& app, const Invocation& invocation) {
  auto o = std::make_shared<GenerateCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "generate",
      "Sample text from a checkpoint on a job config's model, mesh and plan, with a KV cache: "
      "the prompt and the tokens as they come on standard output, a summary (tokens/s, time to "
      "first token) on standard error");
  cmd->add_option("config", o->config, "Job config (TOML)")->required();
  cmd->add_option("--checkpoint", o->checkpoint,
                  "Step folder, checkpoints or dump folder (its newest step), merged .h5, latest "
                  "(the config's dump folder's newest step), or hf:DIR")
      ->required();
  cmd->add_option("--prompt", o->prompt, "Prompt text (text models; default: a newline)");
  cmd->add_option("--prompt-file", o->prompt_file, "Read the prompt text from this file");
  cmd->add_option("--prompt-ids", o->prompt_ids,
                  "Prompt as token ids, e.g. 1,2,3 (models of token files or synthetic data)");
  cmd->add_option("--template", o->chat_template,
                  "Ask the prompt as a user's message in this chat template (the one data "
                  "prepare --sft used; configs/templates/) and stop where the assistant's answer "
                  "ends");
  cmd->add_option("--max-new-tokens", o->run.max_new_tokens, "Tokens to generate per sample")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--temperature", o->run.sampling.temperature,
                  "Divide the logits by this before sampling (lower: more likely text)")
      ->check(finite_in(1e-6, 1e6));
  cmd->add_option("--top-k", o->run.sampling.top_k,
                  "Sample among the K most likely tokens (0: all)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  cmd->add_option("--top-p", o->run.sampling.top_p,
                  "Sample among the most likely tokens whose probabilities reach P (1: all)")
      ->check(finite_in(1e-9, 1.0));
  cmd->add_option("--seed", o->run.sampling.seed,
                  "Seed of the samples: the same seed gives the same text on any layout")
      ->check(unsigned_integer());
  cmd->add_flag("--greedy", o->run.sampling.greedy, "Always the most likely token (no sampling)");
  cmd->add_option("--num-samples", o->run.num_samples, "Samples generated at once from the prompt")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
  cmd->add_flag("--no-cache", o->no_cache,
                "Run the whole context every step instead of the KV cache (to compare speed)");
  cmd->allow_extras();
  cmd->callback([o, cmd, &invocation] {
    o->prompt_given = cmd->count("--prompt") > 0;
    o->prompt_file_given = cmd->count("--prompt-file") > 0;
    o->prompt_ids_given = cmd->count("--prompt-ids") > 0;
    const JobConfig config =
        JobConfig::load(o->config, collect_overrides(cmd->remaining()), launched_world());
    check_generates(config, o->run);
    precheck(config);
    const std::string path = open_model_checkpoint(config, o->checkpoint, "generate");
    // A bad prompt or tokenizer is one error line before any process starts.
    prompt_tokens(*o, config, tokenizer_of(config, path).get());
    const int code =
        run_on_ranks(static_cast<int>(config.world_size()), mesh_of(config), invocation,
                     [&](const LaunchEnv& env) { return run_generate(*o, config, path, env); });
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace vescale::app
