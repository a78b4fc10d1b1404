// parallelize_module: a model written with single-device semantics becomes a tensor- and
// sequence-parallel one by applying a plan on a (sub-)mesh: parameters are materialised as their
// local shards (deferred init) and the plan's forward resharding is installed on module inputs and
// outputs. Partial parameter gradients are reduced by grad sync (NOTE [Grad sync]).
#pragma once

#include <ATen/core/ScalarType.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dmodule/module.h"
#include "dmodule/plan.h"
#include "dmodule/registry.h"
#include "mesh/device_mesh.h"

namespace vescale {

struct ParallelizeOptions {
  at::ScalarType dtype = at::kFloat;
  uint64_t seed = 0;  ///< init stream: (seed, FQN)
  std::vector<Patch> patches;
  /// Which parameters this rank materialises, by any of their FQNs (a pipeline stage's own);
  /// empty: all. The others stay declared only.
  std::function<bool(const std::string& fqn)> materialize;
};

/// What a plan decides for one parameter.
struct ParamPlacement {
  std::string fqn;
  std::vector<int64_t> shape;
  Placements placements;
  std::string key;  ///< the plan key that set it ("" = default Replicate)
};

/// The plan checked against a model and a mesh: placements per parameter, hooks per module,
/// warnings. Throws UserError naming the plan file, key and parameter on any mistake. Needs no
/// communication (works on a layout-only mesh).
struct ResolvedPlan {
  std::vector<ParamPlacement> parameters;
  struct Hook {
    std::string module;  ///< FQN
    bool input;
    std::vector<Placements> placements;
    std::string key;
  };
  std::vector<Hook> hooks;
  std::vector<std::string> warnings;
};
ResolvedPlan resolve_plan(const Plan& plan, Module& module, const DeviceMesh& mesh);

/// A table: each parameter's FQN, global shape, placements, local shape on this rank, bytes and
/// the plan key that placed it; then each forward hook. Works on a layout-only mesh.
std::string describe_plan(const ResolvedPlan& plan, const DeviceMesh& mesh, at::ScalarType dtype);

class ParallelizedModule {
 public:
  Module& module() { return *module_; }
  const DeviceMesh& mesh() const { return mesh_; }
  /// Parameters this rank materialised (each once, tied ones under their first name).
  const std::vector<std::pair<std::string, ParameterPtr>>& parameters() const { return params_; }
  const ResolvedPlan& plan() const { return plan_; }

  /// Clears every gradient. (Reducing them is grad sync's: parallel/grad_sync.h.)
  void zero_grad();

  /// Bytes of parameter memory this rank materialised, and the peak during materialisation.
  int64_t param_bytes() const { return param_bytes_; }
  int64_t init_peak_bytes() const { return init_peak_bytes_; }

  /// A table: each parameter's FQN, global shape, placements, local shape, bytes; each hook.
  std::string dump() const;

 private:
  friend std::unique_ptr<ParallelizedModule> parallelize_module(std::shared_ptr<Module>,
                                                                const DeviceMesh&, const Plan&,
                                                                const ParallelizeOptions&);
  ParallelizedModule(std::shared_ptr<Module> module, DeviceMesh mesh)
      : module_(std::move(module)), mesh_(std::move(mesh)) {}

  std::shared_ptr<Module> module_;
  DeviceMesh mesh_;
  ResolvedPlan plan_;
  ParallelizeOptions options_;
  std::vector<std::pair<std::string, ParameterPtr>> params_;
  int64_t param_bytes_ = 0;
  int64_t init_peak_bytes_ = 0;
};

/// Applies `plan` to `module` on `mesh`. *Collective* over the mesh only if parameters were
/// already materialised (they are then redistributed); deferred parameters are made locally.
std::unique_ptr<ParallelizedModule> parallelize_module(std::shared_ptr<Module> module,
                                                       const DeviceMesh& mesh, const Plan& plan,
                                                       const ParallelizeOptions& options = {});

/// A plan that replicates everything (the single-device model on a mesh of one).
Plan replicate_plan(const std::string& model);

}  // namespace vescale
