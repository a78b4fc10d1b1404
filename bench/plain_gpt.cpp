// vescale-bench-plain: vescale-train's GPT trained by a plain LibTorch loop (torch::nn, ATen,
// torch::optim::AdamW, clip_grad_norm_) with no DTensor, no DModule, no hooks and, of vescale's
// library, only its attention kernels (kernels/local_kernels.h), to show what vescale-train's own
// machinery costs on one process.
//
//   vescale-bench-plain CONFIG.toml [--section.key=value ...] [--threads=N]
//                       [--init=DIR --start-step=K] [--dump=DIR] [--log-steps]
//
// It reads the job config vescale-train reads (the keys of kDefaults; others are ignored) and
// matches bench/peers/gpt_torch.py, whose docstring lists what is matched and where it comes
// from in vescale-train. Prints `plain done: N steps, X tokens/s` (tokens/s over steps 2..N, as
// vescale-train's `done:` line). --init / --dump read and write raw float64 <fqn>.bin files
// (bench/README.md).
#include <toml++/toml.h>
#include <torch/torch.h>

#include "kernels/local_kernels.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace {

namespace nn = torch::nn;

/// Config keys this loop reads, with vescale-train's defaults (docs/configuration.md).
const std::map<std::string, std::string> kDefaults = {
    {"model.vocab_size", "256"},
    {"model.block_size", "64"},
    {"model.n_layer", "2"},
    {"model.n_head", "4"},
    {"model.n_embd", "64"},
    {"model.dropout", "0"},
    {"model.vocab_multiple", "64"},
    {"parallel.tp", "1"},
    {"data.source", "synthetic"},
    {"data.path", ""},
    {"data.val_fraction", "0.1"},
    {"training.steps", "100"},
    {"training.global_batch_size", "8"},
    {"training.seq_len", "64"},
    {"training.seed", "0"},
    {"training.dtype", "float32"},
    {"training.grad_clip", "1.0"},
    {"optimizer.name", "adamw"},
    {"optimizer.lr", "3e-4"},
    {"optimizer.beta1", "0.9"},
    {"optimizer.beta2", "0.95"},
    {"optimizer.eps", "1e-8"},
    {"optimizer.weight_decay", "0.1"},
    {"lr_scheduler.warmup_steps", "0"},
    {"lr_scheduler.decay", "cosine"},
    {"lr_scheduler.min_lr_ratio", "0.1"},
};

class Config {
 public:
  /// The TOML file's values of kDefaults' keys, then `--section.key=value` overrides.
  Config(const std::string& path, const std::vector<std::string>& overrides) : values_(kDefaults) {
    const toml::table doc = toml::parse_file(path);
    for (const auto& [section, table] : doc) {
      if (!table.is_table()) continue;
      for (const auto& [key, node] : *table.as_table()) {
        const std::string name = std::string(section.str()) + "." + std::string(key.str());
        if (values_.count(name) == 0) continue;
        if (auto s = node.value<std::string>(); node.is_string() && s) values_[name] = *s;
        if (auto d = node.value<double>(); node.is_number() && d) values_[name] = repr(*d);
      }
    }
    for (const std::string& item : overrides) {
      const size_t eq = item.find('=');
      const std::string key = item.substr(2, eq - 2);
      if (values_.count(key)) values_[key] = item.substr(eq + 1);
    }
  }
  std::string str(const std::string& key) const { return values_.at(key); }
  double num(const std::string& key) const { return std::stod(values_.at(key)); }
  int64_t integer(const std::string& key) const { return std::llround(num(key)); }

 private:
  static std::string repr(double d) {
    char buffer[64];
    std::snprintf(buffer, sizeof(buffer), "%.17g", d);
    return buffer;
  }
  std::map<std::string, std::string> values_;
};

/// nn::init::normal_ of a Linear's weight with `std`, its bias zeros.
void init_linear(nn::Linear& linear, double std) {
  torch::NoGradGuard no_grad;
  linear->weight.normal_(0.0, std);
  linear->bias.zero_();
}

struct AttentionImpl : nn::Module {
  AttentionImpl(int64_t c, int64_t heads, int64_t n_layer)
      : n_head(heads),
        q_proj(register_module("q_proj", nn::Linear(c, c))),
        k_proj(register_module("k_proj", nn::Linear(c, c))),
        v_proj(register_module("v_proj", nn::Linear(c, c))),
        c_proj(register_module("c_proj", nn::Linear(c, c))) {
    init_linear(q_proj, 0.02);
    init_linear(k_proj, 0.02);
    init_linear(v_proj, 0.02);
    init_linear(c_proj, 0.02 / std::sqrt(2.0 * static_cast<double>(n_layer)));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    const int64_t b = x.size(0), t = x.size(1), c = x.size(2);
    auto heads = [&](nn::Linear& proj) {
      return proj(x).view({b, t, n_head, c / n_head}).transpose(1, 2);
    };
    // vescale-train's kernels, picked as its kernel table picks them on the CPU: NOTE
    // [Blocked causal attention] off float64, else NOTE [Explicit attention]. So only the
    // machinery around them differs.
    const torch::Tensor q = heads(q_proj), k = heads(k_proj), v = heads(v_proj);
    const torch::Tensor y = q.scalar_type() == torch::kDouble
                                ? vescale::local::causal_attention(q, k, v)
                                : vescale::local::blocked_causal_attention(q, k, v);
    return c_proj(y.transpose(1, 2).reshape({b, t, c}));
  }
  int64_t n_head;
  nn::Linear q_proj, k_proj, v_proj, c_proj;
};
TORCH_MODULE(Attention);

struct MLPImpl : nn::Module {
  MLPImpl(int64_t c, int64_t n_layer)
      : c_fc(register_module("c_fc", nn::Linear(c, 4 * c))),
        c_proj(register_module("c_proj", nn::Linear(4 * c, c))) {
    init_linear(c_fc, 0.02);
    init_linear(c_proj, 0.02 / std::sqrt(2.0 * static_cast<double>(n_layer)));
  }
  torch::Tensor forward(const torch::Tensor& x) { return c_proj(torch::gelu(c_fc(x))); }
  nn::Linear c_fc, c_proj;
};
TORCH_MODULE(MLP);

nn::LayerNorm layer_norm(int64_t c) {
  return nn::LayerNorm(nn::LayerNormOptions({c}).eps(1e-5));
}

struct BlockImpl : nn::Module {
  BlockImpl(int64_t c, int64_t heads, int64_t n_layer)
      : ln_1(register_module("ln_1", layer_norm(c))),
        attn(register_module("attn", Attention(c, heads, n_layer))),
        ln_2(register_module("ln_2", layer_norm(c))),
        mlp(register_module("mlp", MLP(c, n_layer))) {}
  torch::Tensor forward(torch::Tensor x) {
    x = x + attn(ln_1(x));
    return x + mlp(ln_2(x));
  }
  nn::LayerNorm ln_1;
  Attention attn;
  nn::LayerNorm ln_2;
  MLP mlp;
};
TORCH_MODULE(Block);

/// The `transformer` container: wte, wpe, h.{i}, ln_f (vescale's parameter names).
struct TransformerImpl : nn::Module {
  TransformerImpl(int64_t vocab, int64_t c, int64_t heads, int64_t n_layer, int64_t block)
      : wte(register_module("wte", nn::Embedding(vocab, c))),
        wpe(register_module("wpe", nn::Embedding(block, c))),
        h(register_module("h", nn::ModuleList())),
        ln_f(register_module("ln_f", layer_norm(c))) {
    for (int64_t i = 0; i < n_layer; ++i)
      h->push_back(Block(c, heads, n_layer));
    torch::NoGradGuard no_grad;
    wte->weight.normal_(0.0, 0.02);
    wpe->weight.normal_(0.0, 0.02);
  }
  nn::Embedding wte, wpe;
  nn::ModuleList h;
  nn::LayerNorm ln_f;
};
TORCH_MODULE(Transformer);

struct GPTImpl : nn::Module {
  explicit GPTImpl(const Config& c)
      : vocab(c.integer("model.vocab_size")),
        padded(padded_vocab(c)),
        transformer(register_module(
            "transformer", Transformer(padded, c.integer("model.n_embd"), c.integer("model.n_head"),
                                       c.integer("model.n_layer"), c.integer("model.block_size")))),
        vocab_mask(torch::zeros({padded})) {
    vocab_mask.slice(0, vocab).fill_(-std::numeric_limits<double>::infinity());
  }
  static int64_t padded_vocab(const Config& c) {
    const int64_t multiple = std::max<int64_t>(1, c.integer("model.vocab_multiple")) *
                             std::max<int64_t>(1, c.integer("parallel.tp"));
    return (c.integer("model.vocab_size") + multiple - 1) / multiple * multiple;
  }
  /// The mean next-token cross entropy of idx [B, T] against targets [B, T].
  torch::Tensor forward(const torch::Tensor& idx, const torch::Tensor& targets) {
    const int64_t t = idx.size(1);
    torch::Tensor x = transformer->wte(idx) + transformer->wpe(torch::arange(t, torch::kLong));
    for (const auto& block : *transformer->h)
      x = block->as<Block>()->forward(x);
    torch::Tensor logits = torch::linear(transformer->ln_f(x), transformer->wte->weight);  // tied
    if (padded > vocab) logits = logits + vocab_mask.to(logits.scalar_type());
    return torch::cross_entropy_loss(logits.view({-1, padded}), targets.reshape({-1}));
  }
  int64_t vocab, padded;
  Transformer transformer;
  torch::Tensor vocab_mask;
};
TORCH_MODULE(GPT);

/// lib/optim/lr_schedule.cpp: linear warmup, then cosine to min_lr_ratio x peak (or constant).
double lr_at(int64_t step, const Config& c) {
  const double peak = c.num("optimizer.lr");
  const int64_t warmup = c.integer("lr_scheduler.warmup_steps");
  const int64_t total = c.integer("training.steps");
  if (step < warmup) return peak * static_cast<double>(step + 1) / static_cast<double>(warmup);
  if (c.str("lr_scheduler.decay") != "cosine" || total <= warmup) return peak;
  const double progress =
      std::min(1.0, static_cast<double>(step - warmup) / static_cast<double>(total - warmup));
  const double low = peak * c.num("lr_scheduler.min_lr_ratio");
  return low + 0.5 * (peak - low) * (1.0 + std::cos(M_PI * progress));
}

/// The train split of a text file: its bytes but the last data.val_fraction.
torch::Tensor train_split(const Config& c) {
  std::ifstream in(c.str("data.path"), std::ios::binary);
  if (!in) throw std::runtime_error("[plain] cannot read data.path " + c.str("data.path"));
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto n_val =
      static_cast<int64_t>(static_cast<double>(bytes.size()) * c.num("data.val_fraction"));
  const int64_t n_train = static_cast<int64_t>(bytes.size()) - n_val;
  return torch::from_blob(bytes.data(), {n_train}, torch::kUInt8).clone();
}

/// `rows` windows of seq_len + 1 bytes at uniform positions: inputs and next-token targets.
std::pair<torch::Tensor, torch::Tensor> batch(const torch::Tensor& train, int64_t rows,
                                              int64_t seq_len) {
  const int64_t span = train.numel() - seq_len - 1;
  const torch::Tensor starts = torch::randint(0, span, {rows}, torch::kLong);
  std::vector<torch::Tensor> windows;
  for (int64_t r = 0; r < rows; ++r)
    windows.push_back(train.narrow(0, starts[r].item<int64_t>(), seq_len + 1));
  const torch::Tensor w = torch::stack(windows).to(torch::kLong);
  return {w.narrow(1, 0, seq_len), w.narrow(1, 1, seq_len)};
}

torch::Tensor read_raw(const std::string& path, const torch::Tensor& like) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("[plain] cannot read " + path);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (static_cast<int64_t>(bytes.size()) != like.numel() * 8)
    throw std::runtime_error("[plain] " + path + " does not hold the tensor's float64 values");
  return torch::from_blob(bytes.data(), like.sizes(), torch::kDouble)
      .to(like.scalar_type(), false, /*copy=*/true);
}

/// The key torch::optim keeps a parameter's state under: the TensorImpl's address as a string in
/// LibTorch 1.13, the address itself in 2.x (told apart by the map's key type, not a version).
template <typename Key>
Key optimizer_state_key(c10::TensorImpl* impl) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream key;
    key << static_cast<void*>(impl);
    return key.str();
  } else {
    return impl;
  }
}

/// Parameters and AdamW moments (at `start_step` steps) from DIR/<fqn>.bin, raw float64.
void load_state(GPT& model, torch::optim::AdamW& optimizer, const std::string& dir,
                int64_t start_step) {
  torch::NoGradGuard no_grad;
  for (auto& item : model->named_parameters()) {
    torch::Tensor& p = item.value();
    p.copy_(read_raw(dir + "/" + item.key() + ".bin", p));
    if (start_step == 0) continue;
    auto state = std::make_unique<torch::optim::AdamWParamState>();
    state->step(start_step);
    state->exp_avg(read_raw(dir + "/" + item.key() + ".exp_avg.bin", p));
    state->exp_avg_sq(read_raw(dir + "/" + item.key() + ".exp_avg_sq.bin", p));
    using Key = std::decay_t<decltype(optimizer.state())>::key_type;
    optimizer.state()[optimizer_state_key<Key>(p.unsafeGetTensorImpl())] = std::move(state);
  }
}

void dump_state(GPT& model, const std::string& dir) {
  std::filesystem::create_directories(dir);
  for (const auto& item : model->named_parameters()) {
    const torch::Tensor v = item.value().detach().to(torch::kDouble).contiguous();
    std::ofstream out(dir + "/" + item.key() + ".bin", std::ios::binary);
    out.write(static_cast<const char*>(v.data_ptr()), static_cast<std::streamsize>(v.nbytes()));
  }
}

struct Options {
  std::string config, init, dump;
  std::vector<std::string> overrides;
  int64_t threads = 0, start_step = 0;
  bool log_steps = false;
};

Options parse_args(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const std::string& flag) { return arg.substr(flag.size()); };
    if (arg.rfind("--threads=", 0) == 0) {
      o.threads = std::stoll(value("--threads="));
    } else if (arg.rfind("--init=", 0) == 0) {
      o.init = value("--init=");
    } else if (arg.rfind("--start-step=", 0) == 0) {
      o.start_step = std::stoll(value("--start-step="));
    } else if (arg.rfind("--dump=", 0) == 0) {
      o.dump = value("--dump=");
    } else if (arg == "--log-steps") {
      o.log_steps = true;
    } else if (arg.rfind("--", 0) == 0 && arg.find('=') != std::string::npos) {
      o.overrides.push_back(arg);
    } else if (o.config.empty() && arg.rfind("--", 0) != 0) {
      o.config = arg;
    } else {
      throw std::runtime_error("[plain] unknown argument " + arg +
                               " (usage: CONFIG.toml [--section.key=value ...] [--threads=N] "
                               "[--init=DIR --start-step=K] [--dump=DIR] [--log-steps])");
    }
  }
  if (o.config.empty()) throw std::runtime_error("[plain] no CONFIG.toml given");
  return o;
}

void run(const Options& o) {
  const Config c(o.config, o.overrides);
  if (c.str("data.source") != "text" || c.num("model.dropout") != 0 ||
      c.str("optimizer.name") != "adamw")
    throw std::runtime_error("[plain] supports data.source = text, dropout 0 and adamw only");
  if (o.threads > 0) torch::set_num_threads(static_cast<int>(o.threads));
  torch::manual_seed(static_cast<uint64_t>(c.integer("training.seed")));
  const auto dtype = c.str("training.dtype") == "float64" ? torch::kDouble : torch::kFloat;

  GPT model(c);
  model->to(dtype);
  std::vector<torch::Tensor> params = model->parameters(), decay, no_decay;
  for (const torch::Tensor& p : params)
    (p.dim() >= 2 ? decay : no_decay).push_back(p);
  auto options = [&](double weight_decay) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(c.num("optimizer.lr"))
            .betas({c.num("optimizer.beta1"), c.num("optimizer.beta2")})
            .eps(c.num("optimizer.eps"))
            .weight_decay(weight_decay));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, options(c.num("optimizer.weight_decay")));
  groups.emplace_back(no_decay, options(0.0));
  torch::optim::AdamW optimizer(std::move(groups));
  if (!o.init.empty()) load_state(model, optimizer, o.init, o.start_step);

  const torch::Tensor train = train_split(c);
  const int64_t rows = c.integer("training.global_batch_size");
  const int64_t seq_len = c.integer("training.seq_len");
  const int64_t steps = c.integer("training.steps");
  const double clip = c.num("training.grad_clip");
  using Clock = std::chrono::steady_clock;
  Clock::time_point timed_start;
  for (int64_t step = o.start_step; step < steps; ++step) {
    if (step == o.start_step + 1) timed_start = Clock::now();
    const auto [x, y] = batch(train, rows, seq_len);
    const double lr = lr_at(step, c);
    for (auto& group : optimizer.param_groups())
      static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
    const torch::Tensor loss = model(x, y);
    for (torch::Tensor& p : params)
      p.mutable_grad() = torch::Tensor();  // zero_grad(set_to_none=True)
    loss.backward();
    const double norm = nn::utils::clip_grad_norm_(
        params, clip > 0 ? clip : std::numeric_limits<double>::infinity());
    optimizer.step();
    if (o.log_steps)
      std::printf("step %lld loss %.17g grad_norm %.17g lr %.17g\n",
                  static_cast<long long>(step + 1), loss.item<double>(), norm, lr);
  }
  const int64_t ran = steps - o.start_step;
  if (ran > 1) {
    const double seconds = std::chrono::duration<double>(Clock::now() - timed_start).count();
    const double tokens = static_cast<double>(rows * seq_len * (ran - 1));
    std::printf("plain done: %lld steps, %.0f tokens/s (libtorch %d.%d.%d, %d thread(s))\n",
                static_cast<long long>(ran), tokens / seconds, TORCH_VERSION_MAJOR,
                TORCH_VERSION_MINOR, TORCH_VERSION_PATCH, torch::get_num_threads());
  }
  if (!o.dump.empty()) dump_state(model, o.dump);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    run(parse_args(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
