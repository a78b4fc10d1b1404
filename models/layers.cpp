#include "models/layers.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>

#include "dtensor/ops.h"

namespace vescale::models {

Linear::Linear(int64_t in, int64_t out, bool bias, double init_std)
    : Module("Linear"), bias_(bias) {
  register_parameter("weight", {out, in}, ParamInit::normal(init_std));
  if (bias) register_parameter("bias", {out}, ParamInit::zeros());
}

Tensors Linear::forward(const Tensors& inputs) {
  if (!bias_) return {ops::linear(inputs.at(0), param("weight"))};
  return {ops::linear(inputs.at(0), param("weight"), param("bias"))};
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
  return ops::linear_group(x, weights, biases);
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
