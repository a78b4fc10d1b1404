#include "autoplan/layout_model.h"

#include <c10/util/accumulate.h>

#include <tuple>

#include "dtensor/dtensor_spec.h"
#include "parallel/pipeline/schedule.h"
#include "train/muon_params.h"
#include "train/task.h"

namespace vescale::autoplan {

double bytes_of(at::ScalarType t) {
  return static_cast<double>(c10::elementSize(t));
}

LayoutModel layout_model(const JobConfig& c) {
  auto model = build_model(c);
  JobMesh job = JobMesh::layout(c.mesh_dims());
  ResolvedPlan plan = resolve_plan(job_plan(c), *model, job.param_mesh());
  std::vector<Layer> layers = model_layers(c, *model);
  // Without a pipeline the whole model is one stage, whatever the pipeline keys say.
  JobConfig one = c;
  if (c.pp == 1) {
    one.pp_schedule = PpSchedule::k1F1B;
    one.pp_virtual = 1;
    one.pp_split = {"balanced"};
  }
  PipelinePlan pipe = plan_pipeline(one, layers);
  const std::optional<TransformerShape> shape = c.family().transformer_shape(c.model_spec());
  std::map<std::string, ExpertSlot> experts;
  for (const auto& [fqn, p] : model->all_parameter_names())
    if (p->expert) experts.emplace(fqn, *p->expert);
  return {std::move(model),  std::move(job),  std::move(plan),
          std::move(layers), std::move(pipe), shape ? shape->vocab_weight : "",
          std::move(experts)};
}

bool holds_parameter(const LayoutModel& lm, const JobMesh& job, const std::string& fqn) {
  const auto expert = lm.experts.find(fqn);
  return expert == lm.experts.end() || expert->second.holder(job.ep()) == job.ep_rank();
}

std::vector<StateMemory> state_by_rank(const JobConfig& c, const LayoutModel& lm) {
  const double param_size = bytes_of(job_dtype(c));
  const double state_size = bytes_of(state_dtype(c));
  const bool master = job_dtype(c) != state_dtype(c);
  // The state tensors of a parameter: AdamW's two moments, SGD's momentum, Muon's for the
  // matrices it updates (NOTE [Muon]) and AdamW's for the rest.
  const auto optimizer_copies = [&c](const std::string& fqn, size_t dims) {
    if (c.optimizer == OptimizerKind::kSgd) return c.momentum > 0 ? 1.0 : 0.0;
    return takes_muon(c, fqn, dims) ? 1.0 : 2.0;
  };
  std::vector<StateMemory> by_rank(c.pp);
  for (size_t s = 0; s < lm.pipe.stages.size(); ++s) {
    bool has_embedding = false, has_head = false;
    for (int i = lm.pipe.stages[s].begin; i < lm.pipe.stages[s].end; ++i) {
      has_embedding = has_embedding || lm.layers[i].kind == LayerKind::kEmbedding;
      has_head = has_head || lm.layers[i].kind == LayerKind::kHead;
    }
    // Elements by their replicas (ZeRO divides over them: dp x cp, an expert's dp x cp / ep),
    // whether they are an expert's, and their optimizer's state tensors.
    std::map<std::tuple<double, bool, double>, double> elements;
    for (const auto& p : lm.plan.parameters) {
      const bool tied_head = has_head && !has_embedding && p.fqn == lm.vocab_weight;
      if (!under_modules(p.fqn, lm.pipe.modules[s]) && !tied_head) continue;
      // Other ep ranks hold the other experts (NOTE [Expert parallelism]).
      if (!holds_parameter(lm, lm.job, p.fqn)) continue;
      const bool is_expert = lm.experts.count(p.fqn) > 0;
      const Box box = Box::local(DTensorSpec(lm.job.param_mesh(), p.placements, p.shape));
      const std::vector<int64_t> sizes =
          lm.job.param_dims(shard_flags(p.placements), is_expert).averaged_sizes;
      const auto replicas = static_cast<double>(c10::multiply_integers(sizes));
      elements[{replicas, is_expert, optimizer_copies(p.fqn, p.shape.size())}] +=
          static_cast<double>(c10::multiply_integers(box.sizes));
    }
    StateMemory& m = by_rank[lm.pipe.schedule.stage_rank[s]];
    for (const auto& [key, count] : elements) {
      const auto [dp, is_expert, copies] = key;
      const double grads = count * param_size / (c.zero >= 2 ? dp : 1.0);
      m.params += count * param_size / (c.zero >= 3 ? dp : 1.0);
      m.grads += grads;
      m.optimizer +=
          count * state_size * (copies + (master ? 1.0 : 0.0)) / (c.zero >= 1 ? dp : 1.0);
      if (is_expert) m.expert_grads += grads;
      m.updated_elements += count / (c.zero >= 1 ? dp : 1.0);
    }
  }
  return by_rank;
}

std::vector<StateMemory> state_memory_by_stage(const JobConfig& c) {
  return state_by_rank(c, layout_model(c));
}

double schedule_bubble(const JobConfig& c) {
  if (c.pp == 1) return 0.0;
  const pipeline::PipelineSchedule schedule =
      pipeline::make_schedule(config_name(c.pp_schedule), static_cast<int>(c.pp),
                              static_cast<int>(c.pp_virtual), static_cast<int>(c.microbatches));
  return pipeline::simulate(schedule).bubble;
}

}  // namespace vescale::autoplan
