#include "train/lm_task.h"

#include "core/error.h"
#include "family/lm_loss.h"
#include "train/model_factory.h"

namespace vescale {
TokenData load_job_tokens(const JobConfig& c) {
  const int64_t vocab_size = c.family().vocab_size(c.model_spec());
  TokenData d = c.data_source == DataSource::kText ? load_text_tokens(c.data_path, c.val_fraction)
                : c.data_source == DataSource::kTokens
                    ? load_bin_tokens(c.data_path, vocab_size)
                    : synthetic_tokens(vocab_size, static_cast<uint64_t>(c.seed));
  VS_USER_CHECK(d.vocab_size <= vocab_size,
                "config {}: data {} has tokens up to {} but model.vocab_size = {}", c.source,
                d.description, d.vocab_size - 1, vocab_size);
  VS_USER_CHECK(d.train->size() > c.seq_len + 1,
                "config {}: data {}: the train split ({} tokens) is not longer than "
                "training.seq_len + 1 = {}",
                c.source, d.description, d.train->size(), c.seq_len + 1);
  VS_USER_CHECK(val_windows_available(*d.val, c.seq_len) >= 1,
                "config {}: data {}: the validation split ({} tokens) holds no window of "
                "training.seq_len + 1 = {} tokens (raise data.val_fraction or lower seq_len)",
                c.source, d.description, d.val->size(), c.seq_len + 1);
  return d;
}

LMTask::LMTask(const JobConfig& c)
    : model_(build_model(c)),
      layered_(as_layered(*model_)),
      layers_(model_layers(c, *model_)),
      tokens_(load_job_tokens(c)),
      seed_(static_cast<uint64_t>(c.seed)),
      seq_len_(c.seq_len),
      fused_loss_(c.fused_loss) {}

Batch LMTask::train_batch(int64_t step, const BatchSlice& slice) {
  auto [x, y] = token_batch(*tokens_.train, seed_, step, seq_len_, slice);
  return {x, y,
          ForwardContext{true, static_cast<uint64_t>(step), slice.row_offset, slice.global_rows}};
}

int64_t LMTask::val_batches(int64_t limit) const {
  return std::min(limit, val_windows_available(*tokens_.val, seq_len_));
}

Batch LMTask::val_batch(int64_t index) {
  auto [x, y] = val_window(*tokens_.val, index, seq_len_);
  return {x, y, ForwardContext::eval()};
}

Tensors LMTask::inputs(const Batch& batch, const DeviceMesh& mesh) const {
  return {distribute_tensor(batch.inputs.to(mesh.device()), mesh,
                            Placements(mesh.ndim(), Placement::replicate()))};
}

DTensor LMTask::loss(const Tensors& outputs, const Batch& batch, const DeviceMesh& mesh) const {
  const DTensor targets = distribute_tensor(batch.targets.to(mesh.device()), mesh,
                                            Placements(mesh.ndim(), Placement::replicate()));
  return lm_loss(outputs.at(0), targets);
}

}  // namespace vescale
