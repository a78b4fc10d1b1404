// A layout's model as `plan auto` prices it (NOTE [Plan auto]): declared, not allocated, its plan
// resolved on the layout-only mesh, its layers cut into the pipeline's stages; and the training
// state each pipeline rank holds under it.
#pragma once

#include <c10/core/ScalarType.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/job_config.h"
#include "dmodule/parallelize.h"
#include "mesh/job_mesh.h"
#include "train/model_factory.h"
#include "train/parallel_model.h"

namespace vescale::autoplan {

/// Bytes of an element of `t`.
double bytes_of(at::ScalarType t);

/// Bytes of training state one rank holds (its pipeline stage, after TP, expert parallelism and
/// ZeRO).
struct StateMemory {
  double params = 0, grads = 0, optimizer = 0;
  /// Of `grads`, the experts': reduced over their own replicas, dp x cp / ep (NOTE [Expert
  /// parallelism]).
  double expert_grads = 0;
  /// Parameter elements the optimizer updates here: its ZeRO share of each of them.
  double updated_elements = 0;
  double total() const { return params + grads + optimizer; }
};

/// A layout's model as plan auto sees it, built once per layout: declared (not allocated), its
/// plan resolved on rank 0 of the layout-only mesh, its layers cut into the pipeline's stages.
struct LayoutModel {
  std::shared_ptr<Module> model;
  JobMesh job;
  ResolvedPlan plan;
  std::vector<Layer> layers;
  PipelinePlan pipe;
  std::string vocab_weight;  ///< the weight a transformer's embedding and head share, if any
  /// A mixture of experts: each expert's parameters by FQN, with which expert they are.
  std::map<std::string, ExpertSlot> experts;
};

LayoutModel layout_model(const JobConfig& c);

/// Whether the rank of `job` (an ep coordinate) holds parameter `fqn` of `lm`: any but an
/// expert's, and its own experts' (NOTE [Expert parallelism]).
bool holds_parameter(const LayoutModel& lm, const JobMesh& job, const std::string& fqn);

/// The state each pp rank holds (rank 0 of its tp, dp and ep groups): every stage placed on it,
/// of the experts those of ep rank 0.
std::vector<StateMemory> state_by_rank(const JobConfig& c, const LayoutModel& lm);

/// The state rank 0 of each pipeline stage holds under `config` (its pp, dp, tp, zero, plan,
/// optimizer and dtypes), from the parameters' local shapes. One entry per stage.
std::vector<StateMemory> state_memory_by_stage(const JobConfig& config);

/// The simulated bubble fraction of `config`'s schedule (pp = 1: 0), what `plan schedule` shows.
double schedule_bubble(const JobConfig& config);

}  // namespace vescale::autoplan
