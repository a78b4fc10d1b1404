#include "train/parallel_model.h"

#include <ATen/ATen.h>
#include <c10/util/accumulate.h>

#include "config/dtype_policy.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/host_parallel.h"
#include "core/host_sync.h"
#include "core/units.h"
#include "dtensor/context_parallel.h"
#include "optim/flat_layout.h"
#include "train/model_factory.h"

namespace vescale {
namespace {

/// The job mesh of `c` on `world`, whose size must be the mesh's.
JobMesh job_mesh(const JobConfig& c, const comm::Group& world) {
  VS_USER_CHECK(c.world_size() == world.size(),
                "config {}: the mesh {} needs {} processes, but "
                "{} are running",
                c.source, c.mesh_text(), c.world_size(), world.size());
  return JobMesh(world, c.mesh_dims());
}

/// How parallelize_module initialises this rank's shards: in the state dtype, from the seed,
/// under a pipeline only the modules of this rank's stages, and under expert parallelism only
/// this ep rank's experts.
ParallelizeOptions init_options(const JobConfig& c, const JobMesh& mesh, Module& model,
                                const std::optional<PipelinePlan>& pipeline) {
  ParallelizeOptions options;
  options.dtype = state_dtype(c);  // bfloat16 runs initialise in float32, then round
  options.seed = static_cast<uint64_t>(c.seed);
  std::vector<std::string> mine;
  if (pipeline) {
    for (size_t s = 0; s < pipeline->modules.size(); ++s) {
      if (pipeline->schedule.stage_rank[s] != mesh.pp_rank()) continue;
      mine.insert(mine.end(), pipeline->modules[s].begin(), pipeline->modules[s].end());
    }
  }
  std::set<std::string> others_experts;
  for (const auto& [fqn, p] : model.all_parameter_names()) {
    if (p->expert && p->expert->holder(mesh.ep()) != mesh.ep_rank()) others_experts.insert(fqn);
  }
  if (!pipeline && others_experts.empty()) return options;
  options.materialize = [mine, others_experts,
                         staged = pipeline.has_value()](const std::string& fqn) {
    return (!staged || under_modules(fqn, mine)) && !others_experts.count(fqn);
  };
  return options;
}

/// Mixed precision: the parameters become bf16 (`dtype`); returns their float32 values by FQN.
/// `flat`: the trained ones share one buffer, laid out as the master weights (a FlatLayout in
/// flat_order(): NOTE [Adjacent runs]), so that rounding the masters into them is one copy. Not
/// under ZeRO, whose masters are rows of each parameter (no run to merge) and whose stage 3 frees
/// and measures each parameter's own storage.
std::map<std::string, at::Tensor> to_compute_dtype(ParallelizedModule& model, at::ScalarType dtype,
                                                   bool flat) {
  std::map<std::string, at::Tensor> initial;
  std::vector<std::pair<std::string, ParameterPtr>> trained;
  std::vector<int64_t> numels;
  std::vector<bool> decays;
  for (auto& [fqn, p] : model.parameters()) {
    const at::Tensor& local = p->get().to_local();
    if (!p->trainable) {  // frozen (NOTE [LoRA]): rounded once, no float32 copy kept
      p->value = DTensor(local.detach().to(dtype), p->get().spec());
      continue;
    }
    flat = flat &&
           (trained.empty() || local.device() == trained.front().second->get().to_local().device());
    trained.emplace_back(fqn, p);
    numels.push_back(local.numel());
    decays.push_back(takes_weight_decay(p->get().ndim()));
  }
  const FlatLayout layout(numels, flat_order(decays));
  at::Tensor buffer;
  if (flat && !trained.empty())
    buffer = at::empty({layout.total()},
                       trained.front().second->get().to_local().options().dtype(dtype));
  for (size_t k = 0; k < trained.size(); ++k) {
    auto& [fqn, p] = trained[k];
    const at::Tensor state = p->get().to_local().detach();
    at::Tensor local;
    if (buffer.defined()) {
      local = layout.piece(buffer, k, state.sizes());
      local.copy_(state);
    } else {
      local = state.to(dtype);
    }
    p->value = DTensor(local, p->get().spec());
    p->get().requires_grad_(true);
    initial[fqn] = state;
  }
  return initial;
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
      pipeline::make_schedule(config_name(c.pp_schedule), static_cast<int>(c.pp),
                              static_cast<int>(c.pp_virtual), static_cast<int>(c.microbatches));
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

ParallelModel::ParallelModel(const JobConfig& c, const comm::Group& world, JobPurpose purpose)
    : config_(c), mesh_(job_mesh(c, world)), flight_(world.flight()) {
  task_ = make_task(c);
  for (const auto& [fqn, p] : task_->model()->named_parameters())
    n_params_ += c10::multiply_integers(p->shape);
  // Deferred init materialises only this rank's stages.
  std::optional<PipelinePlan> pipeline;
  if (c.pp > 1) pipeline = plan_pipeline(c, task_->layers());
  const auto init_start = Clock::now();
  module_ = parallelize_module(task_->model(), mesh_.param_mesh(), job_plan(c),
                               init_options(c, mesh_, *task_->model(), pipeline));
  init_s_ = seconds_since(init_start);
  if (dtype_policy(c).mixed()) {
    float32_init_ = to_compute_dtype(*module_, job_dtype(c), c.zero == 0);
    if (purpose == JobPurpose::kEvaluate) float32_init_.clear();
  }
  for (auto& [fqn, p] : module_->parameters()) {
    if (!p->trainable) {
      frozen_.emplace_back(fqn, &p->get());
      continue;
    }
    params_.emplace_back(fqn, &p->get());
    expert_.push_back(p->expert.has_value());
  }
  moved_.resize(params_.size());
  if (c.activation_checkpoint != Recompute::kNone) {
    std::vector<std::vector<DTensor*>> by_layer;
    for (const std::vector<size_t>& layer : layer_params()) {
      by_layer.emplace_back();
      for (size_t k : layer)
        by_layer.back().push_back(params_[k].second);
    }
    recompute_ = std::make_unique<ActivationCheckpoint>(c, task_->layers(), std::move(by_layer));
  }
  if (pipeline) {
    find_tied(*pipeline);
    make_pipeline(*pipeline);
  }
}

void ParallelModel::find_tied(const PipelinePlan& plan) {
  const int rank = static_cast<int>(mesh_.pp_rank());
  Module& model = *task_->model();
  // Which pp ranks hold each parameter (by any of its names), and its first stage.
  std::map<const Parameter*, std::set<int>> holders;
  std::map<const Parameter*, int> first_stage;
  for (const auto& [fqn, p] : model.all_parameter_names()) {
    for (int s = 0; s < plan.schedule.stages(); ++s) {
      if (!under_modules(fqn, plan.modules[static_cast<size_t>(s)])) continue;
      holders[p.get()].insert(plan.schedule.stage_rank[static_cast<size_t>(s)]);
      first_stage.emplace(p.get(), s);  // stages in order: the first one wins
    }
  }
  const std::map<const Parameter*, size_t> index = param_index();
  for (const auto& [fqn, p] : model.named_parameters()) {
    const std::set<int>& ranks = holders[p.get()];
    // A frozen weight (NOTE [LoRA]) has no gradient to sum; every rank skips it alike.
    if (ranks.size() < 2 || !p->trainable) continue;
    // Collective over the pp group: every pp rank makes the same groups in the same order.
    comm::Group group = mesh_.pp_subgroup(std::vector<int>(ranks.begin(), ranks.end()), "pp");
    if (!ranks.count(rank)) continue;
    const int owner = plan.schedule.stage_rank[static_cast<size_t>(first_stage.at(p.get()))];
    tied_.push_back({index.at(p.get()), group, owner == rank});
    if (owner != rank) not_saved_.insert(fqn);
  }
}

void ParallelModel::make_pipeline(const PipelinePlan& plan) {
  const int rank = static_cast<int>(mesh_.pp_rank());
  const std::map<const Parameter*, size_t> index = param_index();
  std::vector<StageLayers> stages;
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    StageLayers stage{plan.stages[s].begin, plan.stages[s].end, {}};
    if (plan.schedule.stage_rank[s] == rank) {
      for (const Parameter* p : parameters_in(*task_->model(), plan.modules[s])) {
        // Under expert parallelism the stage's other experts are other ep ranks'.
        if (index.count(p)) stage.params.push_back(params_[index.at(p)].second->to_local());
      }
    }
    stages.push_back(stage);
  }
  pipeline_ = std::make_unique<PipelineRunner>(*task_, mesh_, plan.schedule, stages,
                                               micro_batch(0, 0), layer_runner());
}

std::map<const Parameter*, size_t> ParallelModel::param_index() const {
  std::map<const Parameter*, size_t> index;  // params_ lists module_'s trainable ones, in order
  for (const auto& [fqn, p] : module_->parameters())
    if (p->trainable) index.emplace(p.get(), index.size());
  return index;
}

std::vector<std::vector<size_t>> ParallelModel::layer_params() const {
  const std::map<const Parameter*, size_t> index = param_index();
  std::vector<std::vector<size_t>> out;
  for (const Layer& layer : task_->layers()) {
    out.emplace_back();
    for (const Parameter* p : parameters_in(*task_->model(), layer.modules)) {
      if (index.count(p)) out.back().push_back(index.at(p));  // on this rank's stages
    }
  }
  return out;
}

std::string ParallelModel::description() const {
  const JobConfig& c = config_;
  return fmt::format(
      "{}: {} with {} parameters on {} ({} plan), {}, {}; this rank built its parameters in {} "
      "on {} thread{}",
      c.name, task_->model()->type(), n_params_, mesh_.str(), c.plan.empty() ? "replicate" : c.plan,
      config_name(c.dtype), task_->data_description(), format_duration(init_s_), rank_cores(),
      rank_cores() == 1 ? "" : "s");
}

ParameterState ParallelModel::state(size_t k) const {
  if (moved_[k]) return *moved_[k];
  const DTensor& param = *params_[k].second;
  return {param.to_local().detach(), param.spec().on_mesh(mesh_.mesh())};
}

void ParallelModel::move_state(size_t k, ParameterState state) {
  moved_[k] = std::move(state);
}

Batch ParallelModel::micro_batch(int64_t step, int64_t micro) const {
  const BatchSlice slice = batch_slice(config_.global_batch_size, mesh_.batch_shards(),
                                       mesh_.batch_rank(), config_.microbatches, micro);
  Batch batch = sequence_part(task_->train_batch(step, slice));
  // The schedules backpropagate each micro-batch's loss / micro-batches: a loss term a layer
  // attaches to its own backward is scaled alike (NOTE [MoE auxiliary loss]).
  batch.context.loss_scale = 1.0 / static_cast<double>(config_.microbatches);
  return batch;
}

std::optional<RouterFigures> ParallelModel::router_figures(int64_t step) const {
  const std::optional<RouterStats> stats = task_->router_stats(step);
  if (!stats) return std::nullopt;
  const auto device = mesh_.mesh().device();
  const double layers = static_cast<double>(stats->load.size(0));
  // As the loss (TrainStep::mean_loss): the mean over micro-batches and data ranks, each pipeline
  // stage adding its layers' share (the others hold zeros).
  at::Tensor aux = (stats->aux_loss.to(device).to(at::kDouble) /
                    (layers * static_cast<double>(config_.microbatches)))
                       .reshape({1});
  at::Tensor load = stats->load.to(device).to(at::kDouble).contiguous();
  mesh_.data_group().all_reduce(aux, comm::ReduceOp::kAvg);
  mesh_.data_group().all_reduce(load, comm::ReduceOp::kSum);
  if (mesh_.pp() > 1) {
    mesh_.group("pp").all_reduce(aux, comm::ReduceOp::kSum);
    mesh_.group("pp").all_reduce(load, comm::ReduceOp::kSum);
  }
  const at::Tensor worst = (std::get<0>(load.max(1)) / load.mean(1)).max().reshape({1});
  const std::vector<double> host = host_values(at::cat({aux, worst}));
  return RouterFigures{host[0], host[1]};
}

Batch ParallelModel::val_batch(int64_t index) const {
  return sequence_part(task_->val_batch(index));
}

Batch ParallelModel::sequence_part(Batch batch) const {
  if (mesh_.cp() == 1) return batch;
  const comm::Group& ring = mesh_.sequence_group();
  batch.inputs = vescale::sequence_part(batch.inputs, 1, ring.rank(), ring.size());
  batch.targets = vescale::sequence_part(batch.targets, 1, ring.rank(), ring.size());
  batch.context.cp = &ring;
  return batch;
}

JobMesh::ParamDims ParallelModel::param_dims(size_t k) const {
  return mesh_.param_dims(shard_flags(params_[k].second->placements()), expert_[k]);
}

std::vector<JobMesh::ParamDims> ParallelModel::param_dims() const {
  std::vector<JobMesh::ParamDims> out;
  for (size_t k = 0; k < params_.size(); ++k)
    out.push_back(param_dims(k));
  return out;
}

LayerRunner ParallelModel::layer_runner() {
  return [this](int64_t first, int64_t end, const Tensors& in, const ForwardContext& context) {
    const Task* task = task_.get();
    // Every forward's layers (training, eval, generate, a pipeline stage's) run with the ep group
    // (NOTE [Expert parallelism]).
    const comm::Group* ep = mesh_.ep() > 1 ? &mesh_.expert_group() : nullptr;
    LayerRunner run = [task, flight = flight_.get(), ep](int64_t f, int64_t e, const Tensors& i,
                                                         const ForwardContext& ctx) {
      // NOTE [Flight recorder]: the layers' collectives say which layers posted them.
      const comm::FlightSite site(
          *flight, e - f == 1 ? fmt::format("layer {}", f) : fmt::format("layers {}-{}", f, e - 1));
      const ContextParallelScope cp(ctx.cp);
      ForwardContext with_ep = ctx;
      with_ep.ep = ep;
      return task->run_layers(f, e, i, with_ep);
    };
    if (recompute_) {
      run = [checkpoint = recompute_.get(), run](int64_t f, int64_t e, const Tensors& i,
                                                 const ForwardContext& ctx) {
        return checkpoint->run_layers(f, e, i, ctx, run);
      };
    }
    if (!wrapper_) return run(first, end, in, context);
    return wrapper_(first, end, in, context, run);
  };
}

void ParallelModel::wrap_layers(LayerWrapper wrapper, bool collective_over_dp) {
  wrapper_ = std::move(wrapper);
  collective_over_dp_ = collective_over_dp;
}

std::optional<DTensor> ParallelModel::forward_outputs(const Batch& batch) {
  if (pipeline_) return pipeline_->forward_outputs(batch);
  return task_->forward_outputs(batch, mesh_.param_mesh(), layer_runner()).at(0);
}

double ParallelModel::forward_loss(const Batch& batch) {
  if (pipeline_) return pipeline_->forward_loss(batch);
  return task_->forward_loss(batch, mesh_.param_mesh(), layer_runner()).to_local().item<double>();
}

}  // namespace vescale
