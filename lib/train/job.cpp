#include "train/job.h"

#include <fmt/ranges.h>

#include <map>
#include <vector>

#include "config/dtype_policy.h"
#include "core/logging.h"
#include "family/model_family.h"
#include "optim/adamw.h"
#include "optim/muon.h"
#include "optim/sgd.h"
#include "train/model_factory.h"
#include "train/muon_params.h"

namespace vescale {
namespace {

/// Gradient reduction over each parameter's replicas, dp x cp (and over the holders of a tied
/// weight), and ZeRO's sharding of the state over them: ZeRO-3 keeps each parameter's rows and
/// gathers a layer's around its run.
void setup_grad_sync(Job& job, bool mixed) {
  ParallelModel& model = *job.model;
  const JobConfig& c = model.config();
  std::vector<DTensor*> params;
  std::vector<GradSync::Replicas> replicas;
  // NOTE [Dims by role]: the mesh says over which ranks each gradient is averaged.
  const std::vector<JobMesh::ParamDims> dims = model.param_dims();
  for (size_t k = 0; k < model.params().size(); ++k) {
    params.push_back(model.params()[k].second);
    replicas.push_back({&model.mesh().replicas_of(dims[k].averaged), dims[k].averaged_sizes});
  }
  const auto bucket_bytes = static_cast<int64_t>(c.bucket_mb * (1 << 20));
  job.grad_sync = std::make_unique<GradSync>(
      params, std::move(replicas), bucket_bytes, Zero::dp_grads(static_cast<int>(c.zero)),
      mixed ? std::optional(dtype_policy(c).reduce) : std::nullopt);
  for (const TiedParameter& t : model.tied())
    job.grad_sync->add_sum(model.params()[t.index].second, t.holders);
  if (c.zero == 0) return;
  job.zero = std::make_unique<Zero>(static_cast<int>(c.zero), model.params(), dims, model.mesh(),
                                    *job.grad_sync, bucket_bytes);
  job.zero->set_layers(model.layer_params());
  if (c.zero == 3) {
    for (size_t k = 0; k < model.params().size(); ++k)
      model.move_state(k, {job.zero->piece(k).view(job.zero->piece_spec(k).local_shape()),
                           job.zero->piece_spec(k)});
  }
  Zero* zero = job.zero.get();
  model.wrap_layers(
      [zero](int64_t first, int64_t end, const Tensors& in, const ForwardContext& context,
             const LayerRunner& run) { return zero->run_layers(first, end, in, context, run); },
      c.zero == 3);
}

/// Muon for the views of the matrices takes_muon says, AdamW for the rest (NOTE [Muon]); one log
/// line says how they split.
std::unique_ptr<Optimizer> make_muon(const JobConfig& c, std::vector<ParamView> views,
                                     const AdamWOptions& adamw) {
  std::vector<bool> matrix;
  for (const ParamView& v : views)
    matrix.push_back(takes_muon(c, v.name, v.spec.shape.size()));
  const MuonOptions options{c.momentum,     c.nesterov,
                            c.ns_steps,     c.muon_scale == MuonScale::kAdamWRms,
                            c.weight_decay, 1e-7};
  auto muon = std::make_unique<Muon>(std::move(views), matrix, options, adamw);
  const size_t others = muon->views().size() - muon->matrices();
  if (muon->matrices() == 0) {
    log_rank0(
        "[optimizer] optimizer.name = muon: model.name = \"{}\" has no 2-D weights outside "
        "optimizer.adamw_params = [{}]; AdamW updates all {} of this rank's parameter pieces",
        c.model, fmt::join(c.adamw_params, ", "), others);
  } else {
    log_rank0(
        "[optimizer] Muon updates {} matrices of this rank, AdamW its {} other parameter pieces "
        "(optimizer.adamw_params = [{}])",
        muon->matrices(), others, fmt::join(c.adamw_params, ", "));
  }
  return muon;
}

/// The optimizer over each parameter's whole local shard (or its rows under ZeRO), through
/// float32 master weights when the parameters are bf16; the masters become the parameters' state.
void setup_optimizer(Job& job) {
  ParallelModel& model = *job.model;
  const JobConfig& c = model.config();
  std::vector<ParamView> views;
  if (job.zero) {
    views = job.zero->optimizer_views();
  } else {
    const GradSync* sync = job.grad_sync.get();
    for (size_t k = 0; k < model.params().size(); ++k) {
      const auto& [fqn, p] = model.params()[k];
      views.push_back(ParamView::whole(fqn, p, p->spec().on_mesh(model.mesh().mesh())));
      // The reduced gradient as grad sync leaves it (.grad, or a float32 one when mixed).
      views.back().flat_grad = [sync, k] { return sync->piece_grad(k); };
    }
  }
  const std::map<std::string, at::Tensor> initial = model.take_float32_init();
  if (!initial.empty()) {
    job.master = std::make_unique<MasterWeights>(views, [&initial](const ParamView& v) {
      return initial.at(v.name).reshape({-1}).narrow(0, v.offset, v.flat.numel());
    });
    views = job.master->views();
    for (size_t k = 0; k < views.size(); ++k)
      model.move_state(k, {views[k].flat.view(views[k].spec.local_shape()), views[k].spec});
  }
  const AdamWOptions adamw{c.lr, c.beta1, c.beta2, c.eps, c.weight_decay};
  if (c.optimizer == OptimizerKind::kAdamW) {
    job.optimizer = std::make_unique<AdamW>(views, adamw);
  } else if (c.optimizer == OptimizerKind::kMuon) {
    job.optimizer = make_muon(c, std::move(views), adamw);
  } else {
    job.optimizer = std::make_unique<SGD>(views, SGDOptions{c.momentum, c.weight_decay});
  }
}

/// Each parameter as the train step sees it: the mesh dims that split it for the gradient norm
/// (NOTE [Dims by role]), and whether this rank counts it (a tied weight counts once, on the rank
/// that saves it).
std::vector<StepParam> step_params(const ParallelModel& model) {
  std::vector<StepParam> out;
  for (size_t k = 0; k < model.params().size(); ++k) {
    const auto& [fqn, p] = model.params()[k];
    out.push_back({p, model.param_dims(k).norm_split(model.config().zero > 0), model.saves(fqn)});
  }
  return out;
}

/// The train step: the schedule, grad sync, clipping over every dim that splits the
/// parameters, and the optimizer.
void setup_train_step(Job& job) {
  const ParallelModel& model = *job.model;
  const JobConfig& c = model.config();
  if (!model.pipeline()) {
    Task& task = model.task();
    const DeviceMesh& param_mesh = model.mesh().param_mesh();
    job.accumulation = std::make_unique<GradientAccumulation>(
        c.microbatches, [&task, param_mesh, run = job.model->layer_runner()](const Batch& b) {
          return task.forward_loss(b, param_mesh, run);
        });
  }
  Job* self = &job;
  job.train_step = std::make_unique<TrainStep>(
      model.mesh(), step_params(model), model.mesh().norm_dims(c.zero > 0), job.schedule(),
      *job.grad_sync, *job.optimizer, c.grad_clip,
      [self] {
        if (self->master) self->master->take_grads();
      },
      [self] { self->after_update(); });
}

}  // namespace

StateBytes Job::state_bytes() const {
  int64_t params_bytes = 0;
  if (zero) {
    params_bytes = zero->param_bytes();
  } else {
    for (const auto& [fqn, p] : model->params())
      params_bytes += static_cast<int64_t>(p->to_local().nbytes());
  }
  for (const auto& [fqn, p] : model->frozen())  // a LoRA job's base (NOTE [LoRA])
    params_bytes += static_cast<int64_t>(p->to_local().nbytes());
  // Master weights count as optimizer state (as in the ZeRO paper).
  return {{"params", params_bytes},
          {"grads", grad_sync->grad_bytes() + (master ? master->grad_bytes() : 0)},
          {"optimizer", optimizer->state_bytes() + (master ? master->bytes() : 0)}};
}

void Job::after_update() {
  if (master) master->copy_to_params();
  if (zero) zero->after_update();
}

Schedule& Job::schedule() {
  if (model->pipeline()) return *model->pipeline();
  return *accumulation;
}

std::unique_ptr<Job> build_job(const JobConfig& c, const comm::Group& world) {
  auto job = std::make_unique<Job>();
  job->model = std::make_unique<ParallelModel>(c, world, JobPurpose::kTrain);
  setup_grad_sync(*job, dtype_policy(c).mixed());
  setup_optimizer(*job);
  setup_train_step(*job);
  job->trace = std::make_unique<StepTrace>(world.flight());
  job->train_step->set_trace(job->trace.get());
  log_rank0("{}", job->model->description());
  return job;
}

}  // namespace vescale
