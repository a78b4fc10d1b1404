#include "train/job.h"

#include <c10/util/accumulate.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/error.h"
#include "core/logging.h"
#include "optim/adamw.h"
#include "optim/sgd.h"
#include "parallel/pipeline/stage_split.h"
#include "train/model_factory.h"

namespace vescale {
namespace {

/// Mixed precision: the parameters become bf16 (`dtype`); returns their float32 values by FQN.
std::map<std::string, at::Tensor> to_compute_dtype(ParallelizedModule& model,
                                                   at::ScalarType dtype) {
  std::map<std::string, at::Tensor> initial;
  for (auto& [fqn, p] : model.parameters()) {
    const at::Tensor state = p->get().to_local().detach();
    p->value = DTensor(state.to(dtype), p->get().spec());
    p->get().requires_grad_(true);
    initial[fqn] = state;
  }
  return initial;
}

std::unique_ptr<Optimizer> make_optimizer(const JobConfig& c, Job& job,
                                          const std::map<std::string, at::Tensor>& initial) {
  // Each parameter's whole local shard (or its rows under ZeRO), placed on the job mesh (for
  // checkpoints).
  std::vector<ParamView> views;
  if (job.zero) {
    views = job.zero->optimizer_views();
  } else {
    const GradSync* sync = job.grad_sync.get();
    for (size_t k = 0; k < job.params.size(); ++k) {
      const auto& [fqn, p] = job.params[k];
      views.push_back(ParamView::whole(fqn, p, p->spec().on_mesh(job.mesh.mesh())));
      // The reduced gradient as grad sync leaves it (.grad, or a float32 one when mixed).
      views.back().flat_grad = [sync, k] { return sync->piece_grad(k); };
    }
  }
  if (!initial.empty()) {
    job.master = std::make_unique<MasterWeights>(views, [&initial](const ParamView& v) {
      return initial.at(v.name).reshape({-1}).narrow(0, v.offset, v.flat.numel());
    });
    views = job.master->views();
  }
  if (c.optimizer == "adamw")
    return std::make_unique<AdamW>(views,
                                   AdamWOptions{c.lr, c.beta1, c.beta2, c.eps, c.weight_decay});
  return std::make_unique<SGD>(views, SGDOptions{c.momentum, c.weight_decay});
}

void check_world(const JobConfig& c, const comm::Group& world) {
  VS_USER_CHECK(c.world_size() == world.size(),
                "config {}: the mesh {} needs {} processes, but "
                "{} are running",
                c.source, c.mesh_text(), c.world_size(), world.size());
}

/// The parameters under `modules` (by any of their names), each once, in the model's order.
std::vector<const Parameter*> parameters_in(Module& model,
                                            const std::vector<std::string>& modules) {
  std::vector<const Parameter*> out;
  std::set<const Parameter*> seen;
  for (const auto& [fqn, p] : model.all_parameter_names()) {
    if (under_modules(fqn, modules) && seen.insert(p.get()).second) out.push_back(p.get());
  }
  return out;
}

}  // namespace

PipelinePlan plan_pipeline(const JobConfig& c, const std::vector<Layer>& layers) {
  PipelinePlan plan;
  plan.schedule =
      pipeline::make_schedule(c.pp_schedule, static_cast<int>(c.pp), static_cast<int>(c.pp_virtual),
                              static_cast<int>(c.microbatches));
  plan.stages = pipeline::split_stages(stage_layers(layers), plan.schedule.stages(), c.pp_split);
  for (const pipeline::Stage& stage : plan.stages) {
    std::vector<std::string> modules;
    for (int i = stage.begin; i < stage.end; ++i) {
      const auto& m = layers[static_cast<size_t>(i)].modules;
      modules.insert(modules.end(), m.begin(), m.end());
    }
    plan.modules.push_back(modules);
  }
  return plan;
}

namespace {

/// Under a pipeline: the runner, each local parameter's per-stage use, and the tied weights
/// (held by several pp ranks) summed over their holders by grad sync.
void setup_pipeline(Job& job, const PipelinePlan& plan, std::vector<StepParam>& step_params) {
  const int rank = static_cast<int>(job.mesh.pp_rank());
  Module& model = *job.task->model();
  // Which pp ranks hold each parameter (by any of its names), in the model's order.
  std::map<const Parameter*, std::set<int>> holders;
  std::map<const Parameter*, int> first_stage;
  for (const auto& [fqn, p] : model.all_parameter_names()) {
    for (int s = 0; s < plan.schedule.stages(); ++s) {
      if (!under_modules(fqn, plan.modules[static_cast<size_t>(s)])) continue;
      holders[p.get()].insert(plan.schedule.stage_rank[static_cast<size_t>(s)]);
      first_stage.emplace(p.get(), s);  // stages in order: the first one wins
    }
  }
  std::map<const Parameter*, DTensor*> local;
  for (auto& [fqn, p] : job.model->parameters())
    local[p.get()] = &p->get();
  for (const auto& [fqn, p] : model.named_parameters()) {
    const std::set<int>& ranks = holders[p.get()];
    if (ranks.size() < 2) continue;
    // Collective over the pp group: every pp rank makes the same groups in the same order.
    comm::Group tied = job.mesh.pp_subgroup(std::vector<int>(ranks.begin(), ranks.end()), "pp");
    if (!ranks.count(rank)) continue;
    job.grad_sync->add_sum(local.at(p.get()), tied);
    const int owner = plan.schedule.stage_rank[static_cast<size_t>(first_stage.at(p.get()))];
    if (owner != rank) {
      job.not_saved.insert(fqn);
      for (StepParam& sp : step_params) {
        if (sp.param == local.at(p.get())) sp.in_norm = false;
      }
    }
  }
  std::vector<StageLayers> stages;
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    StageLayers stage{plan.stages[s].begin, plan.stages[s].end, {}};
    if (plan.schedule.stage_rank[s] == rank) {
      for (const Parameter* p : parameters_in(model, plan.modules[s]))
        stage.params.push_back(local.at(p)->to_local());
    }
    stages.push_back(stage);
  }
  job.pipeline = std::make_unique<PipelineRunner>(*job.task, job.mesh, plan.schedule, stages,
                                                  job.micro_batch(0, 0), job.layer_runner());
}

/// ZeRO-3: the parameters (indices into job.params) each of the task's layers uses.
std::vector<std::vector<size_t>> layer_params(const Job& job) {
  std::map<const Parameter*, size_t> index;  // job.params lists job.model's, in its order
  for (const auto& [fqn, p] : job.model->parameters())
    index.emplace(p.get(), index.size());
  std::vector<std::vector<size_t>> out;
  for (const Layer& layer : job.task->layers()) {
    out.emplace_back();
    for (const Parameter* p : parameters_in(*job.task->model(), layer.modules)) {
      if (index.count(p)) out.back().push_back(index.at(p));  // on this rank's stages
    }
  }
  return out;
}

}  // namespace

Batch Job::micro_batch(int64_t step, int64_t micro) {
  const BatchSlice slice =
      batch_slice(config.global_batch_size, config.dp, mesh.dp_rank(), config.microbatches, micro);
  return task->train_batch(step, slice);
}

StateBytes Job::state_bytes() const {
  int64_t params_bytes = 0;
  if (zero) {
    params_bytes = zero->param_bytes();
  } else {
    for (const auto& [fqn, p] : params)
      params_bytes += static_cast<int64_t>(p->to_local().nbytes());
  }
  // Master weights count as optimizer state (as in the ZeRO paper).
  return {{"params", params_bytes},
          {"grads", grad_sync->grad_bytes()},
          {"optimizer", optimizer->state_bytes() + (master ? master->bytes() : 0)}};
}

void Job::after_update() {
  if (master) master->copy_to_params();
  if (zero) zero->after_update();
}

Schedule& Job::schedule() {
  if (pipeline) return *pipeline;
  return *accumulation;
}

LayerRunner Job::layer_runner() {
  Task* t = task.get();
  LayerRunner run = [t](int64_t first, int64_t end, const Tensors& in,
                        const ForwardContext& context) {
    return t->run_layers(first, end, in, context);
  };
  if (!zero) return run;
  Zero* z = zero.get();
  return [z, run](int64_t first, int64_t end, const Tensors& in, const ForwardContext& context) {
    return z->run_layers(first, end, in, context, run);
  };
}

double Job::forward_loss(const Batch& batch) {
  if (pipeline) return pipeline->forward_loss(batch);
  return task->forward_loss(batch, mesh.param_mesh(), layer_runner()).to_local().item<double>();
}

namespace {

/// How parallelize_module initialises this rank's shards: in the state dtype, from the seed, and
/// under a pipeline only the modules of this rank's stages.
ParallelizeOptions init_options(const Job& job, const std::optional<PipelinePlan>& pipeline) {
  const JobConfig& c = job.config;
  ParallelizeOptions options;
  options.dtype = state_dtype(c);  // bfloat16 runs initialise in float32, then round
  options.seed = static_cast<uint64_t>(c.seed);
  if (pipeline) {
    std::vector<std::string> mine;
    for (size_t s = 0; s < pipeline->modules.size(); ++s) {
      if (pipeline->schedule.stage_rank[s] != job.mesh.pp_rank()) continue;
      mine.insert(mine.end(), pipeline->modules[s].begin(), pipeline->modules[s].end());
    }
    options.materialize = [mine](const std::string& fqn) { return under_modules(fqn, mine); };
  }
  return options;
}

/// job.params from the parallelized model, and each one as the train step sees it: the mesh dims
/// that split it for the gradient norm.
std::vector<StepParam> list_params(Job& job) {
  const JobConfig& c = job.config;
  // Pieces on different pp ranks are different parameters: disjoint over pp too; under ZeRO each
  // dp rank clips its own rows.
  std::vector<std::string> across;
  if (c.pp > 1) across.push_back("pp");
  if (c.zero > 0) across.push_back("dp");
  std::vector<StepParam> step_params;
  for (auto& [fqn, p] : job.model->parameters()) {
    DTensor* value = &p->get();
    job.params.emplace_back(fqn, value);
    std::vector<bool> sharded;
    for (const Placement& pl : value->placements())
      sharded.push_back(pl.is_shard());
    step_params.push_back({value, job.mesh.split_dims(sharded, across), true});
  }
  return step_params;
}

/// Gradient reduction over dp, and ZeRO's sharding of the state over it.
void setup_grad_sync(Job& job, bool mixed) {
  const JobConfig& c = job.config;
  std::vector<DTensor*> params;
  for (const auto& [fqn, p] : job.params)
    params.push_back(p);
  const auto bucket_bytes = static_cast<int64_t>(c.bucket_mb * (1 << 20));
  job.grad_sync = std::make_unique<GradSync>(params, job.mesh.group("dp"), bucket_bytes,
                                             Zero::dp_grads(static_cast<int>(c.zero)),
                                             mixed ? std::optional(state_dtype(c)) : std::nullopt);
  if (c.zero > 0) {
    job.zero = std::make_unique<Zero>(static_cast<int>(c.zero), job.params, job.mesh,
                                      *job.grad_sync, bucket_bytes);
    job.zero->set_layers(layer_params(job));
  }
}

/// The schedule of a step's micro-batches: the pipeline, or gradient accumulation without one.
void setup_schedule(Job& job, const std::optional<PipelinePlan>& pipeline,
                    std::vector<StepParam>& step_params) {
  if (pipeline) {
    setup_pipeline(job, *pipeline, step_params);
    return;
  }
  Task& task = *job.task;
  const DeviceMesh& param_mesh = job.mesh.param_mesh();
  job.accumulation = std::make_unique<GradientAccumulation>(
      job.config.microbatches, [&task, param_mesh, run = job.layer_runner()](const Batch& b) {
        return task.forward_loss(b, param_mesh, run);
      });
}

/// The train step: the schedule, grad sync, clipping over every dim that splits the
/// parameters, and the optimizer.
void setup_train_step(Job& job, const std::vector<StepParam>& step_params) {
  const JobConfig& c = job.config;
  std::vector<int> norm_dims = job.mesh.param_mesh_dims();
  if (c.pp > 1) norm_dims.push_back(job.mesh.mesh().dim_index("pp"));
  if (c.zero > 0) norm_dims.push_back(job.mesh.mesh().dim_index("dp"));
  Job* self = &job;
  job.train_step =
      std::make_unique<TrainStep>(job.mesh, step_params, norm_dims, job.schedule(), *job.grad_sync,
                                  *job.optimizer, c.grad_clip, [self] { self->after_update(); });
}

}  // namespace

std::unique_ptr<Job> build_job(const JobConfig& c, const comm::Group& world, JobPurpose purpose) {
  const bool train = purpose == JobPurpose::kTrain;
  check_world(c, world);
  auto job = std::make_unique<Job>(c, JobMesh(world, c.mesh_dims()));
  job->task = make_task(c);
  for (const auto& [fqn, p] : job->task->model()->named_parameters())
    job->n_params += c10::multiply_integers(p->shape);

  // Deferred init materialises only this rank's stages.
  std::optional<PipelinePlan> pipeline;
  if (c.pp > 1) pipeline = plan_pipeline(c, job->task->layers());
  job->model = parallelize_module(job->task->model(), job->mesh.param_mesh(), job_plan(c),
                                  init_options(*job, pipeline));
  const bool mixed = job_dtype(c) != state_dtype(c);
  std::map<std::string, at::Tensor> initial;
  if (mixed) initial = to_compute_dtype(*job->model, job_dtype(c));
  std::vector<StepParam> step_params = list_params(*job);
  setup_grad_sync(*job, mixed);
  if (train) job->optimizer = make_optimizer(c, *job, initial);
  initial.clear();
  setup_schedule(*job, pipeline, step_params);
  if (train) setup_train_step(*job, step_params);
  log_rank0("{}: {} with {} parameters on {} ({} plan), {}, {}{}", c.name,
            job->task->model()->type(), job->n_params, job->mesh.str(),
            c.plan.empty() ? "replicate" : c.plan, c.dtype, job->task->data_description(),
            train ? "" : "; evaluation only (no optimizer)");
  return job;
}

}  // namespace vescale
