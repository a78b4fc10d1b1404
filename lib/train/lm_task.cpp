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
  VS_USER_CHECK(c.sft_pack || d.train_mask != nullptr,
                "config {}: data.sft_pack = false pads fine-tuning examples, and data {} has no "
                "loss mask (data prepare --sft writes one); remove the key",
                c.source, d.description);
  VS_USER_CHECK(val_rows_available(*d.val, d.val_starts, !c.sft_pack, c.seq_len) >= 1,
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
      fused_loss_(c.fused_loss),
      pack_(c.sft_pack),
      cp_(c.cp),
      eval_windows_(c.eval_windows) {}

double LMTask::train_normalizer(int64_t step, const BatchSlice& slice) {
  if (step != counted_step_) {
    const BatchSlice all{slice.global_rows, 0, slice.global_rows};
    counted_ = trained_targets(
        *tokens_.train_mask, batch_windows(tokens_.train->size(), tokens_.train_starts, examples(),
                                           seed_, step, seq_len_, all));
    counted_step_ = step;
  }
  // N / (R M): the micro-batches and data ranks (dp x cp) each hold rows / global_rows of it.
  const double share =
      static_cast<double>(slice.rows) / static_cast<double>(slice.global_rows * cp_);
  return counted_ > 0 ? static_cast<double>(counted_) * share : 1.0;
}

double LMTask::val_normalizer() {
  const int64_t windows = val_batches(eval_windows_);
  if (val_counted_ < 0) {
    std::vector<RowWindow> rows;
    for (int64_t w = 0; w < windows; ++w)
      rows.push_back(val_row(*tokens_.val, tokens_.val_starts, examples(), w, seq_len_));
    val_counted_ = trained_targets(*tokens_.val_mask, rows);
  }
  // Each window's parts on the cp ranks: the evaluator averages windows x cp of them.
  return val_counted_ > 0 ? static_cast<double>(val_counted_) / static_cast<double>(windows * cp_)
                          : 1.0;
}

Batch LMTask::train_batch(int64_t step, const BatchSlice& slice) {
  ForwardContext context{true, static_cast<uint64_t>(step), slice.row_offset, slice.global_rows};
  if (tokens_.train_mask == nullptr) {
    auto [x, y] = token_batch(*tokens_.train, seed_, step, seq_len_, slice);
    return {x, y, context};
  }
  auto [x, y] = window_batch(*tokens_.train, tokens_.train_mask.get(),
                             batch_windows(tokens_.train->size(), tokens_.train_starts, examples(),
                                           seed_, step, seq_len_, slice),
                             seq_len_);
  context.loss_normalizer = train_normalizer(step, slice);
  return {x, y, context};
}

int64_t LMTask::val_batches(int64_t limit) const {
  return std::min(limit,
                  val_rows_available(*tokens_.val, tokens_.val_starts, examples(), seq_len_));
}

Batch LMTask::val_batch(int64_t index) {
  if (tokens_.val_mask == nullptr) {
    auto [x, y] = val_window(*tokens_.val, index, seq_len_);
    return {x, y, ForwardContext::eval()};
  }
  auto [x, y] = window_batch(
      *tokens_.val, tokens_.val_mask.get(),
      {val_row(*tokens_.val, tokens_.val_starts, examples(), index, seq_len_)}, seq_len_);
  ForwardContext context = ForwardContext::eval();
  context.loss_normalizer = val_normalizer();
  return {x, y, context};
}

Tensors LMTask::inputs(const Batch& batch, const DeviceMesh& mesh) const {
  return {distribute_tensor(batch.inputs.to(mesh.device()), mesh,
                            Placements(mesh.ndim(), Placement::replicate()))};
}

DTensor LMTask::loss(const Tensors& outputs, const Batch& batch, const DeviceMesh& mesh) const {
  const DTensor targets = distribute_tensor(batch.targets.to(mesh.device()), mesh,
                                            Placements(mesh.ndim(), Placement::replicate()));
  return lm_loss(outputs.at(0), targets, batch.context.loss_normalizer);
}

}  // namespace vescale
