#include "dtensor/op_driver.h"

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "dtensor/transitions.h"

namespace vescale::detail {
namespace {

/// What the rule decides, mesh dim by mesh dim: the placements each input must have, the
/// output's, and on which dims the whole computation is replicated.
struct OpLayout {
  std::vector<Placements> wanted;  ///< per input
  Placements output;
  std::vector<bool> replicated_dim;  ///< per mesh dim: every input and the output Replicate
};

/// The mesh of the op: the first present input's; every input must share its shape.
const DeviceMesh& op_mesh(const OpCall& call) {
  const DTensor* first = nullptr;
  for (const DTensor* in : call.inputs) {
    if (in != nullptr && first == nullptr) first = in;
  }
  VS_CHECK(first != nullptr, "[dtensor] {} needs at least one input", call.name);
  for (const DTensor* in : call.inputs) {
    VS_CHECK(in == nullptr || in->mesh().shape() == first->mesh().shape(),
             "[dtensor] {}: inputs live on different meshes", call.name);
  }
  return first->mesh();
}

OpLayout apply_rule(const OpCall& call, const DeviceMesh& mesh) {
  const int mesh_ndim = mesh.ndim();
  const size_t n = call.inputs.size();
  OpLayout layout{std::vector<Placements>(n, Placements(mesh_ndim, Placement::replicate())),
                  Placements(mesh_ndim, Placement::replicate()),
                  std::vector<bool>(mesh_ndim, true)};
  for (int i = 0; i < mesh_ndim; ++i) {
    Placements current;
    for (const DTensor* in : call.inputs)
      current.push_back(in ? in->placements()[i] : Placement::replicate());
    const DimStrategy s = call.rule(mesh.size(i))(current);
    if (s.fallback) {
      spdlog::debug("[dtensor] {}: no rule for {} on mesh dim {}; inputs go to Replicate",
                    call.name, placements_str(current), mesh.dim_names()[i]);
    }
    layout.output[i] = s.output;
    bool replicated = s.output.is_replicate();
    for (size_t j = 0; j < n; ++j) {
      layout.wanted[j][i] = s.inputs[j];
      replicated = replicated && (!call.inputs[j] || s.inputs[j].is_replicate());
    }
    layout.replicated_dim[i] = replicated;
  }
  return layout;
}

/// Records, for a parameter used as it is, on which mesh dims its gradient is a partial or a
/// full sum (grad sync reduces the partial ones; NOTE [Grad sync]).
void record_parameter_use(const OpCall& call, const DTensor& input, ParamState& param,
                          const Placements& wanted, const OpLayout& layout) {
  const DeviceMesh& mesh = input.mesh();
  for (int i = 0; i < mesh.ndim(); ++i) {
    if (!wanted[i].is_replicate()) continue;
    auto& mine = layout.replicated_dim[i] ? param.full_dims : param.partial_dims;
    const auto& other = layout.replicated_dim[i] ? param.partial_dims : param.full_dims;
    VS_CHECK(std::find(other.begin(), other.end(), i) == other.end(),
             "[dtensor] {}: a parameter {} is used both with sharded and with replicated "
             "computation on mesh dim {}; its gradient would mix partial and full sums",
             call.name, input.str(), mesh.dim_names()[i]);
    if (std::find(mine.begin(), mine.end(), i) == mine.end()) mine.push_back(i);
  }
}

/// Input `input` moved to `wanted`, with the gradient reduction NOTE [Gradient placements] asks
/// for: a Replicate input used in sharded computation gets a partial gradient, reduced here
/// unless its producer reduces it (NOTE [Deferred gradient reduction]) or it is a parameter.
DTensor prepare_input(const OpCall& call, const DTensor& input, const Placements& wanted,
                      const OpLayout& layout) {
  const DeviceMesh& mesh = input.mesh();
  const int mesh_ndim = mesh.ndim();
  std::vector<bool> sharded_use(mesh_ndim);
  for (int i = 0; i < mesh_ndim; ++i)
    sharded_use[i] = wanted[i].is_replicate() && !layout.replicated_dim[i];
  DTensor moved = input.placements() == wanted
                      ? DTensor(local_for_use(input, sharded_use), input.spec())
                      : input.redistribute(wanted);
  at::Tensor local = moved.to_local();
  if (!local.requires_grad()) return moved;
  ParamState* param = param_state(input);
  if (param && local.is_same(input.to_local())) {
    record_parameter_use(call, input, *param, wanted, layout);
    return moved;
  }
  const auto& upstream = input.grad_reduced_upstream();
  for (int i = 0; i < mesh_ndim; ++i) {
    const bool reduced_by_producer =
        std::find(upstream.begin(), upstream.end(), i) != upstream.end();
    if (sharded_use[i] && !reduced_by_producer) local = sum_grad_over(local, mesh.group(i));
  }
  return DTensor(local, moved.spec());
}

}  // namespace

DTensor run_op(const OpCall& call) {
  const DeviceMesh& mesh = op_mesh(call);
  const OpLayout layout = apply_rule(call, mesh);
  const size_t n = call.inputs.size();
  std::vector<at::Tensor> locals(n);
  std::vector<DTensor> moved;
  moved.reserve(n);
  std::vector<const DTensorSpec*> specs(n, nullptr);
  for (size_t j = 0; j < n; ++j) {
    if (!call.inputs[j]) continue;
    moved.push_back(prepare_input(call, *call.inputs[j], layout.wanted[j], layout));
    locals[j] = moved.back().to_local();
    specs[j] = &moved.back().spec();
  }
  DTensorSpec output_spec(mesh, layout.output, call.output_shape);
  at::Tensor out = call.local(locals, specs, output_spec);
  return DTensor(std::move(out), std::move(output_spec));
}

}  // namespace vescale::detail
