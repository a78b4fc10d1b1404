#include "train/job.h"

#include <c10/util/accumulate.h>

#include "core/error.h"
#include "core/logging.h"
#include "optim/adamw.h"
#include "optim/sgd.h"
#include "train/model_factory.h"

namespace vescale {
namespace {

std::unique_ptr<Optimizer> make_optimizer(const JobConfig& c, const Job& job) {
  // Each parameter's whole local shard, placed on the job mesh (for checkpoints).
  std::vector<ParamView> views;
  for (const auto& [fqn, p] : job.params)
    views.push_back(ParamView::whole(fqn, p, p->spec().on_mesh(job.mesh.mesh())));
  if (c.optimizer == "adamw")
    return std::make_unique<AdamW>(views,
                                   AdamWOptions{c.lr, c.beta1, c.beta2, c.eps, c.weight_decay});
  return std::make_unique<SGD>(views, SGDOptions{c.momentum, c.weight_decay});
}

void check_world(const JobConfig& c, const comm::Group& world) {
  VS_USER_CHECK(c.world_size() == world.size(),
                "config {}: the mesh parallel.pp x dp x tp = {} x {} x {} needs {} processes, but "
                "{} are running",
                c.source, c.pp, c.dp, c.tp, c.world_size(), world.size());
}

}  // namespace

DTensor Job::micro_batch_loss(int64_t step, int64_t micro) {
  const BatchSlice slice =
      batch_slice(config.global_batch_size, config.dp, mesh.dp_rank(), config.microbatches, micro);
  return task->forward_loss(task->train_batch(step, slice), mesh.param_mesh());
}

std::unique_ptr<Job> build_job(const JobConfig& c, const comm::Group& world) {
  check_world(c, world);
  auto job = std::make_unique<Job>(c, JobMesh(world, c.pp, c.dp, c.tp));
  job->task = make_task(c);

  ParallelizeOptions options;
  options.dtype = job_dtype(c);
  options.seed = static_cast<uint64_t>(c.seed);
  job->model = parallelize_module(job->task->model(), job->mesh.param_mesh(), job_plan(c), options);
  std::vector<DTensor*> params;
  for (auto& [fqn, p] : job->model->parameters()) {
    job->params.emplace_back(fqn, &p->get());
    params.push_back(&p->get());
    job->n_params += c10::multiply_integers(p->shape);
  }

  const auto bucket_bytes = static_cast<int64_t>(c.bucket_mb * (1 << 20));
  job->grad_sync = std::make_unique<GradSync>(params, job->mesh.group("dp"), bucket_bytes);
  job->optimizer = make_optimizer(c, *job);
  job->schedule = std::make_unique<GradientAccumulation>(c.microbatches);
  job->train_step = std::make_unique<TrainStep>(job->mesh, params, *job->schedule, *job->grad_sync,
                                                *job->optimizer, c.grad_clip);
  log_rank0("{}: {} with {} parameters on {} ({} plan), {}, {}", c.name, job->task->model()->type(),
            job->n_params, job->mesh.str(), c.plan.empty() ? "replicate" : c.plan, c.dtype,
            job->task->data_description());
  return job;
}

}  // namespace vescale
