#include "train/regression_task.h"

#include "dtensor/ops.h"
#include "train/model_factory.h"

namespace vescale {
namespace {

/// The fixed random teacher of the family's feature sizes.
TeacherRegression make_teacher(const JobConfig& c) {
  const auto [in, out] = c.family().features(c.model_spec());
  return TeacherRegression(in, out, static_cast<uint64_t>(c.seed));
}

}  // namespace

RegressionTask::RegressionTask(const JobConfig& c)
    : model_(build_model(c)),
      layered_(as_layered(*model_)),
      layers_(model_layers(c, *model_)),
      teacher_(make_teacher(c)),
      dtype_(job_dtype(c)),
      loss_dtype_(state_dtype(c)),
      val_rows_(c.micro_batch_size()) {}

Batch RegressionTask::train_batch(int64_t step, const BatchSlice& slice) {
  auto [x, y] = teacher_.batch(step, slice);
  return {x, y,
          ForwardContext{true, static_cast<uint64_t>(step), slice.row_offset, slice.global_rows}};
}

Batch RegressionTask::val_batch(int64_t index) {
  auto [x, y] = teacher_.val_batch(index, val_rows_);
  return {x, y, ForwardContext::eval()};
}

Tensors RegressionTask::inputs(const Batch& batch, const DeviceMesh& mesh) const {
  return {distribute_tensor(batch.inputs.to(mesh.device(), dtype_), mesh,
                            Placements(mesh.ndim(), Placement::replicate()))};
}

DTensor RegressionTask::loss(const Tensors& outputs, const Batch& batch,
                             const DeviceMesh& mesh) const {
  const Placements r(mesh.ndim(), Placement::replicate());
  DTensor d = ops::sub(ops::to_dtype(outputs.at(0), loss_dtype_),
                       distribute_tensor(batch.targets.to(mesh.device(), loss_dtype_), mesh, r));
  return ops::mean(ops::mul(d, d)).redistribute(r);
}

}  // namespace vescale
