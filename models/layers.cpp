#include "models/layers.h"

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
