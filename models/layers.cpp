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
