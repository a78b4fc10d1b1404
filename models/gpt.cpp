#include "models/gpt.h"

#include <ATen/ATen.h>

#include <cmath>

#include "core/error.h"
#include "dmodule/registry.h"
#include "dtensor/context_parallel.h"
#include "dtensor/ops.h"

namespace vescale::models {
namespace {

ModuleArgs block_args(const GPTConfig& c, std::shared_ptr<const DropoutState> dropout) {
  ModuleArgs args;
  args.numbers = {{"n_embd", double(c.n_embd)},
                  {"n_head", double(c.n_head)},
                  {"n_layer", double(c.n_layer)},
                  {"fused_projections", c.fused_projections ? 1.0 : 0.0}};
  args.objects["dropout"] = std::move(dropout);
  return args;
}

}  // namespace

int64_t GPTConfig::padded_vocab(int64_t tp) const {
  return models::padded_vocab(vocab_size, vocab_multiple, tp);
}

void register_gpt_modules() {
  static const bool once = [] {
    register_module_type("CausalSelfAttention", [](const ModuleArgs& a) {
      return std::make_shared<CausalSelfAttention>(
          a.integer("n_embd"), a.integer("n_head"), a.integer("n_layer"),
          a.object<DropoutState>("dropout"), a.integer("fused_projections") != 0);
    });
    register_module_type("GPTMLP", [](const ModuleArgs& a) {
      return std::make_shared<GPTMLP>(a.integer("n_embd"), a.integer("n_layer"),
                                      a.object<DropoutState>("dropout"));
    });
    return true;
  }();
  (void)once;
}

CausalSelfAttention::CausalSelfAttention(int64_t n_embd, int64_t n_head, int64_t n_layer,
                                         std::shared_ptr<const DropoutState> dropout,
                                         bool fused_projections)
    : Module("CausalSelfAttention"), n_head_(n_head), fused_projections_(fused_projections) {
  VS_USER_CHECK(n_head > 0 && n_embd % n_head == 0,
                "[model] n_embd {} is not a multiple of n_head {}", n_embd, n_head);
  q_ = register_module("q_proj", std::make_shared<Linear>(n_embd, n_embd, true));
  k_ = register_module("k_proj", std::make_shared<Linear>(n_embd, n_embd, true));
  v_ = register_module("v_proj", std::make_shared<Linear>(n_embd, n_embd, true));
  proj_ = register_module(
      "c_proj", std::make_shared<Linear>(n_embd, n_embd, true, 0.02 / std::sqrt(2.0 * n_layer)));
  drop_ = register_module("resid_dropout", std::make_shared<Dropout>(std::move(dropout)));
}

Tensors CausalSelfAttention::forward(const Tensors& inputs) {
  const DTensor& x = inputs.at(0);
  const int64_t b = x.size(0), t = x.size(1), c = x.size(2);
  const std::vector<DTensor> qkv = project(x, {q_.get(), k_.get(), v_.get()}, fused_projections_);
  auto heads = [&](const DTensor& p) {
    return ops::transpose(ops::reshape(p, {b, t, n_head_, c / n_head_}), 1, 2);
  };
  DTensor y = ops::causal_attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]));
  y = ops::reshape(ops::transpose(y, 1, 2), {b, t, c});
  return {(*drop_)((*proj_)(y))};
}

GPTMLP::GPTMLP(int64_t n_embd, int64_t n_layer, std::shared_ptr<const DropoutState> dropout)
    : Module("GPTMLP") {
  fc_ = register_module("c_fc", std::make_shared<Linear>(n_embd, 4 * n_embd, true));
  proj_ = register_module("c_proj", std::make_shared<Linear>(4 * n_embd, n_embd, true,
                                                             0.02 / std::sqrt(2.0 * n_layer)));
  drop_ = register_module("dropout", std::make_shared<Dropout>(std::move(dropout)));
}

Tensors GPTMLP::forward(const Tensors& inputs) {
  return {(*drop_)((*proj_)(ops::gelu((*fc_)(inputs.at(0)))))};
}

Block::Block(const GPTConfig& config, std::shared_ptr<const DropoutState> dropout)
    : Module("Block") {
  ln_1_ = register_module("ln_1", std::make_shared<LayerNorm>(config.n_embd));
  attn_ =
      register_module("attn", create_module(config.attention_type, block_args(config, dropout)));
  ln_2_ = register_module("ln_2", std::make_shared<LayerNorm>(config.n_embd));
  mlp_ = register_module("mlp", create_module(config.mlp_type, block_args(config, dropout)));
}

Tensors Block::forward(const Tensors& inputs) {
  const auto [x, normed] = add_then_norm(*ln_2_, inputs.at(0), (*attn_)((*ln_1_)(inputs.at(0))));
  return {ops::add(x, (*mlp_)(normed))};
}

GPT::GPT(const GPTConfig& config, int64_t tp)
    : DecoderLM("GPT", config.vocab_size, config.block_size, config.n_layer,
                config.padded_vocab(tp)),
      config_(config),
      dropout_(std::make_shared<DropoutState>()) {
  VS_USER_CHECK(config.vocab_size > 0 && config.block_size > 0 && config.n_layer > 0,
                "[model] gpt needs positive vocab_size, block_size and n_layer");
  register_gpt_modules();
  dropout_->p = config.dropout;
  auto transformer = std::make_shared<Container>();
  register_module("transformer", transformer);
  wte_ = transformer->add("wte", std::make_shared<Embedding>(padded_vocab(), config.n_embd));
  wpe_ = transformer->add("wpe", std::make_shared<Embedding>(config.block_size, config.n_embd));
  drop_ = transformer->add("drop", std::make_shared<Dropout>(dropout_));
  auto h = transformer->add("h", std::make_shared<Container>());
  for (int64_t i = 0; i < config.n_layer; ++i) {
    blocks_.push_back(h->add(std::to_string(i), std::make_shared<Block>(config, dropout_)));
  }
  final_norm_ = transformer->add("ln_f", std::make_shared<LayerNorm>(config.n_embd));
  lm_head_ = register_module(
      "lm_head", std::make_shared<TiedLinear>(wte_->all_parameter_names().at(0).second));
  assign_names();
}

Tensors GPT::run_layers(int64_t first, int64_t end, const Tensors& inputs,
                        const ForwardContext& context) {
  dropout_->follow(context);
  return DecoderLM::run_layers(first, end, inputs, context);
}

DTensor GPT::embed(const DTensor& idx) {
  const int64_t t = idx.size(1);
  const DeviceMesh& mesh = idx.mesh();
  // Under context parallelism, the global positions of this rank's part of the sequence.
  DTensor pos = distribute_tensor(sequence_positions(0, t, t, mesh.device()), mesh,
                                  Placements(mesh.ndim(), Placement::replicate()));
  return (*drop_)(ops::add((*wte_)(idx), (*wpe_)(pos)));
}

}  // namespace vescale::models
