#include "dtensor/op_driver.h"

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "dtensor/transitions.h"

namespace vescale::detail {

DTensor run_op(const OpCall& call) {
  const DTensor* first = nullptr;
  for (const DTensor* in : call.inputs) {
    if (in != nullptr && first == nullptr) first = in;
  }
  VS_CHECK(first != nullptr, "[dtensor] {} needs at least one input", call.name);
  const DeviceMesh& mesh = first->mesh();
  const int mesh_ndim = mesh.ndim();
  const size_t n = call.inputs.size();
  for (const DTensor* in : call.inputs) {
    VS_CHECK(in == nullptr || in->mesh().shape() == mesh.shape(),
             "[dtensor] {}: inputs live on different meshes", call.name);
  }

  // 1. The rule, mesh dim by mesh dim.
  std::vector<Placements> wanted(n, Placements(mesh_ndim, Placement::replicate()));
  Placements output(mesh_ndim, Placement::replicate());
  std::vector<bool> replicated_dim(mesh_ndim, true);
  for (int i = 0; i < mesh_ndim; ++i) {
    Placements current;
    for (const DTensor* in : call.inputs)
      current.push_back(in ? in->placements()[i] : Placement::replicate());
    const DimStrategy s = call.rule(mesh.size(i))(current);
    if (s.fallback) {
      spdlog::debug("[dtensor] {}: no rule for {} on mesh dim {}; inputs go to Replicate",
                    call.name, placements_str(current), mesh.dim_names()[i]);
    }
    for (size_t j = 0; j < n; ++j)
      wanted[j][i] = s.inputs[j];
    output[i] = s.output;
    replicated_dim[i] = output[i].is_replicate();
    for (size_t j = 0; j < n; ++j)
      replicated_dim[i] = replicated_dim[i] && (!call.inputs[j] || s.inputs[j].is_replicate());
  }

  // 2. Redistribute, and 3. reduce the gradient of Replicate inputs used in sharded computation
  // (their local gradient is a partial sum over that mesh dim).
  std::vector<at::Tensor> locals(n);
  std::vector<DTensor> moved;
  moved.reserve(n);
  std::vector<const DTensorSpec*> specs(n, nullptr);
  for (size_t j = 0; j < n; ++j) {
    if (!call.inputs[j]) continue;
    const DTensor& input = *call.inputs[j];
    // Used as Replicate in sharded computation: its local gradient will be a partial sum.
    std::vector<bool> sharded_use(mesh_ndim);
    for (int i = 0; i < mesh_ndim; ++i)
      sharded_use[i] = wanted[j][i].is_replicate() && !replicated_dim[i];
    if (input.placements() == wanted[j]) {
      moved.emplace_back(local_for_use(input, sharded_use), input.spec());
    } else {
      moved.push_back(input.redistribute(wanted[j]));
    }
    at::Tensor local = moved.back().to_local();
    const auto& upstream = input.grad_reduced_upstream();
    // A parameter used as it is keeps partial gradients for grad sync to reduce in buckets.
    ParamState* param = param_state(input);
    const bool as_parameter = param && local.is_same(input.to_local());
    if (local.requires_grad()) {
      for (int i = 0; i < mesh_ndim; ++i) {
        if (!wanted[j][i].is_replicate()) continue;
        if (!as_parameter) {
          const bool reduced_by_producer =
              std::find(upstream.begin(), upstream.end(), i) != upstream.end();
          if (sharded_use[i] && !reduced_by_producer) local = sum_grad_over(local, mesh.group(i));
          continue;
        }
        auto& mine = replicated_dim[i] ? param->full_dims : param->partial_dims;
        const auto& other = replicated_dim[i] ? param->partial_dims : param->full_dims;
        VS_CHECK(std::find(other.begin(), other.end(), i) == other.end(),
                 "[dtensor] {}: a parameter {} is used both with sharded and with replicated "
                 "computation on mesh dim {}; its gradient would mix partial and full sums",
                 call.name, input.str(), mesh.dim_names()[i]);
        if (std::find(mine.begin(), mine.end(), i) == mine.end()) mine.push_back(i);
      }
    }
    locals[j] = local;
    specs[j] = &moved.back().spec();
  }

  // 4. The op on the pieces.
  DTensorSpec output_spec(mesh, output, call.output_shape);
  at::Tensor out = call.local(locals, specs, output_spec);
  return DTensor(std::move(out), std::move(output_spec));
}

}  // namespace vescale::detail
