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
template <typename Call>
const DeviceMesh& op_mesh(const Call& call) {
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

template <typename Call>
OpLayout apply_rule(const Call& call, const DeviceMesh& mesh) {
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
void record_parameter_use(const char* name, const DTensor& input, ParamState& param,
                          const Placements& wanted, const OpLayout& layout) {
  const DeviceMesh& mesh = input.mesh();
  for (int i = 0; i < mesh.ndim(); ++i) {
    if (!wanted[i].is_replicate()) continue;
    auto& mine = layout.replicated_dim[i] ? param.full_dims : param.partial_dims;
    const auto& other = layout.replicated_dim[i] ? param.partial_dims : param.full_dims;
    VS_CHECK(std::find(other.begin(), other.end(), i) == other.end(),
             "[dtensor] {}: a parameter {} is used both with sharded and with replicated "
             "computation on mesh dim {}; its gradient would mix partial and full sums",
             name, input.str(), mesh.dim_names()[i]);
    if (std::find(mine.begin(), mine.end(), i) == mine.end()) mine.push_back(i);
  }
}

/// Input `input` moved to `wanted`, with the gradient reduction NOTE [Gradient placements] asks
/// for: a Replicate input used in sharded computation gets a partial gradient, reduced here
/// unless its producer reduces it (NOTE [Deferred gradient reduction]) or it is a parameter.
DTensor prepare_input(const char* name, const DTensor& input, const Placements& wanted,
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
    record_parameter_use(name, input, *param, wanted, layout);
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

/// The inputs of an op moved as its rule wants them: their locals and specs (null if absent).
struct MovedInputs {
  std::vector<DTensor> moved;
  std::vector<at::Tensor> locals;
  std::vector<const DTensorSpec*> specs;
};

template <typename Call>
MovedInputs move_inputs(const Call& call, const OpLayout& layout) {
  const size_t n = call.inputs.size();
  MovedInputs m{{}, std::vector<at::Tensor>(n), std::vector<const DTensorSpec*>(n, nullptr)};
  m.moved.reserve(n);
  for (size_t j = 0; j < n; ++j) {
    if (!call.inputs[j]) continue;
    m.moved.push_back(prepare_input(call.name, *call.inputs[j], layout.wanted[j], layout));
    m.locals[j] = m.moved.back().to_local();
    m.specs[j] = &m.moved.back().spec();
  }
  return m;
}

}  // namespace

DTensor run_op(const OpCall& call) {
  const DeviceMesh& mesh = op_mesh(call);
  const OpLayout layout = apply_rule(call, mesh);
  const MovedInputs in = move_inputs(call, layout);
  DTensorSpec output_spec(mesh, layout.output, call.output_shape);
  at::Tensor out = call.local(in.locals, in.specs, output_spec);
  return DTensor(std::move(out), std::move(output_spec));
}

std::vector<DTensor> run_op(const MultiOpCall& call) {
  const DeviceMesh& mesh = op_mesh(call);
  const OpLayout layout = apply_rule(call, mesh);
  const MovedInputs in = move_inputs(call, layout);
  std::vector<DTensorSpec> specs;
  for (const auto& shape : call.output_shapes)
    specs.emplace_back(mesh, layout.output, shape);
  std::vector<at::Tensor> locals = call.local(in.locals, in.specs, specs);
  VS_CHECK(locals.size() == specs.size(), "[dtensor] {}: {} outputs for {} shapes", call.name,
           locals.size(), specs.size());
  std::vector<DTensor> out;
  for (size_t i = 0; i < locals.size(); ++i)
    out.emplace_back(std::move(locals[i]), std::move(specs[i]));
  return out;
}

}  // namespace vescale::detail
