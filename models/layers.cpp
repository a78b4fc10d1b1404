#include "models/layers.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "dtensor/ops.h"

namespace vescale::models {

Linear::Linear(int64_t in, int64_t out, bool bias, double init_std)
    : Module("Linear"), bias_(bias) {
  register_parameter("weight", {out, in}, ParamInit::normal(init_std));
  if (bias) register_parameter("bias", {out}, ParamInit::zeros());
}

Tensors Linear::forward(const Tensors& inputs) {
  const DTensor& x = inputs.at(0);
  DTensor y =
      bias_ ? ops::linear(x, param("weight"), param("bias")) : ops::linear(x, param("weight"));
  if (adapted()) y = ops::add(y, adapter_term(x));
  return {y};
}

// NOTE [LoRA]
// Low-rank adaptation (Hu et al., 2021; what Hugging Face peft trains): a frozen weight W [out, in]
// gains A [r, in] and B [out, r], and the projection computes x W^T + alpha / r · dropout(x) A^T
// B^T. A starts as peft's kaiming_uniform_(a = sqrt(5)), U(±1 / sqrt(in)), and B at zero, so step
// 0 is the base model. Every other parameter is frozen (Parameter::trainable false): it gets no
// gradient, so grad sync, ZeRO, the optimizer, clipping and checkpoints (which iterate
// ParallelModel::params(), the trainable ones) never see it, and a bf16 run keeps no float32
// copy of it. The factors are parameters of the Linear named lora_A.weight and lora_B.weight
// (peft's names), placed after their weight under tp (NOTE [LoRA placements]); a pipeline cuts
// them with their layer, ZeRO shards their state. The dropout masks are layout-free (the key of
// "<linear>.lora_dropout", the step and the rows, as every dropout). Which projections take
// adapters is lora.targets by role, the family's table (ModelFamily::lora_roles). A Mixtral
// expert's w1, w2 and w3 are Linears too, but run inside the MoE layer (ops::moe_experts): their
// factors carry the expert's slot, so expert parallelism holds them on its rank, and the experts'
// kernels add each adapter's term there, in this order of operations, with the 1 / ep share of
// the gradient the expert's weights take (NOTE [Grouped experts], NOTE [Expert parallelism]).
// Those take no dropout (peft's expert adapters neither).
void Linear::add_adapter(int64_t rank, double scaling,
                         std::shared_ptr<const DropoutState> dropout) {
  VS_CHECK(!adapted() && dropout, "[model] {}: one adapter per Linear", fqn());
  const ParameterPtr weight = parameter("weight");  // a copy: registering moves params_
  const int64_t out = weight->shape[0], in = weight->shape[1];
  ParameterPtr a = register_parameter("lora_A.weight", {rank, in},
                                      ParamInit::uniform(1.0 / std::sqrt(static_cast<double>(in))));
  ParameterPtr b = register_parameter("lora_B.weight", {out, rank}, ParamInit::zeros());
  a->adapter = AdapterOf{AdapterOf::Factor::kA, weight.get()};
  b->adapter = AdapterOf{AdapterOf::Factor::kB, weight.get()};
  a->expert = b->expert = weight->expert;  // held on their expert's ep rank
  adapter_scaling_ = scaling;
  adapter_dropout_ = std::move(dropout);
}

DTensor Linear::adapter_term(const DTensor& x) {
  const DropoutState& d = *adapter_dropout_;
  const DTensor dropped =
      ops::dropout(x, d.p, d.key(fqn() + ".lora_dropout"), d.training, d.row_offset, d.global_rows);
  return ops::scale(
      ops::linear(ops::linear(dropped, param("lora_A.weight")), param("lora_B.weight")),
      adapter_scaling_);
}

// NOTE [Fused projections]
// q, k and v (and SwiGLU's gate and up) are linear maps of the same input: one GEMM over their
// weights side by side reads x once, runs one larger kernel instead of three small ones, and in
// the backward gives x's gradient in one GEMM instead of three and two additions. The parameters
// stay what they are (names, shapes, checkpoints, Hugging Face files, plans): the fused weight is
// their concatenation along the output rows, made at each forward by a differentiable cat (in
// bf16 a copy of 3C^2 elements a layer, ~30 us for GPT-2 124M's 12 layers on an H200), whose
// backward hands each parameter its rows of the fused gradient. It is not cached across forwards:
// ZeRO-3 frees and regathers the parameters around every layer run, and c10d's all-gather writes
// them without bumping a version a cache could check. Under tp each rank concatenates its local
// rows, so the split of the local output gives each projection's local output (column-parallel
// weights S(0): the output is S(-1) for all three). Projections are called one by one instead
// when training.fused_projections is false, when a plan hooks or patches one of them, or when
// their weights (or biases) are placed differently.
std::vector<DTensor> project(const DTensor& x, const std::vector<Linear*>& projections,
                             bool fused) {
  bool fusable = fused && projections.size() > 1;
  for (Linear* p : projections) {
    fusable = fusable && !p->hooked() && p->has_bias() == projections[0]->has_bias() &&
              p->param("weight").placements() == projections[0]->param("weight").placements() &&
              (!p->has_bias() ||
               p->param("bias").placements() == projections[0]->param("bias").placements());
  }
  if (!fusable) {
    std::vector<DTensor> out;
    for (Linear* p : projections)
      out.push_back((*p)(x));
    return out;
  }
  std::vector<const DTensor*> weights, biases;
  for (Linear* p : projections) {
    weights.push_back(&p->param("weight"));
    if (p->has_bias()) biases.push_back(&p->param("bias"));
  }
  std::vector<DTensor> out = ops::linear_group(x, weights, biases);
  for (size_t i = 0; i < projections.size(); ++i) {
    if (projections[i]->adapted()) out[i] = ops::add(out[i], projections[i]->adapter_term(x));
  }
  return out;
}

TiedLinear::TiedLinear(ParameterPtr weight) : Module("Linear") {
  register_tied_parameter("weight", std::move(weight));
}

Tensors TiedLinear::forward(const Tensors& inputs) {
  return {ops::linear(inputs.at(0), param("weight"))};
}

int64_t padded_vocab(int64_t vocab, int64_t multiple, int64_t tp) {
  const int64_t m = std::max<int64_t>(1, multiple) * std::max<int64_t>(1, tp);
  return (vocab + m - 1) / m * m;
}

DTensor vocab_mask(const DTensorSpec& embedding, int64_t vocab, at::ScalarType dtype) {
  Placements placements;
  for (const auto& p : embedding.placements)
    placements.push_back(p.is_shard(0) ? p : Placement::replicate());
  DTensorSpec spec(embedding.mesh, placements, {embedding.shape[0]});
  const Box box = Box::local(spec);
  const Device device = spec.mesh.device();
  at::Tensor index = at::arange(box.offsets[0], box.offsets[0] + box.sizes[0],
                                at::dtype(at::kLong).device(device));
  at::Tensor mask = at::zeros(box.sizes, at::dtype(dtype).device(device))
                        .masked_fill(index >= vocab, -std::numeric_limits<double>::infinity());
  return DTensor(mask, spec);
}

LayerNorm::LayerNorm(int64_t dim, double eps) : Module("LayerNorm"), eps_(eps) {
  register_parameter("weight", {dim}, ParamInit::ones());
  register_parameter("bias", {dim}, ParamInit::zeros());
}

Tensors LayerNorm::forward(const Tensors& inputs) {
  return {ops::layer_norm(inputs.at(0), param("weight"), param("bias"), eps_)};
}

std::pair<DTensor, DTensor> LayerNorm::after_add(const DTensor& x, const DTensor& delta) {
  return ops::add_layer_norm(x, delta, param("weight"), param("bias"), eps_);
}

Embedding::Embedding(int64_t num, int64_t dim) : Module("Embedding") {
  register_parameter("weight", {num, dim}, ParamInit::normal(0.02));
}

Tensors Embedding::forward(const Tensors& inputs) {
  return {ops::embedding(inputs.at(0), param("weight"))};
}

void DropoutState::follow(const ForwardContext& context) {
  training = context.training;
  counter = context.step;
  row_offset = context.row_offset;
  global_rows = context.global_rows;
}

RngKey DropoutState::key(const std::string& fqn) const {
  return derive({seed, stream_id(fqn)}, counter);
}

Dropout::Dropout(std::shared_ptr<const DropoutState> state)
    : Module("Dropout"), state_(std::move(state)) {}

Tensors Dropout::forward(const Tensors& inputs) {
  return {ops::dropout(inputs.at(0), state_->p, state_->key(fqn()), state_->training,
                       state_->row_offset, state_->global_rows)};
}

}  // namespace vescale::models
