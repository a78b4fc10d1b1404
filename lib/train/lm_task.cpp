#include "train/lm_task.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "core/logging.h"
#include "family/lm_loss.h"
#include "train/model_factory.h"

namespace vescale {
namespace {

/// The targets a split's mask trains, and how many of them the job's windows reach.
struct Reach {
  int64_t trained = 0, reached = 0;
};

/// NOTE [Trained targets]
/// Fine-tuning data trains the targets its mask marks that fall inside a window: packed
/// (data.sft_pack = true), windows start anywhere, so every one but the split's first token;
/// unpadded examples (false) are each cut to their first seq_len + 1 tokens, and an answer past
/// a long prompt is cut away. A mean over no target is no loss: a job whose windows reach none
/// is refused before its first step (train, plan lint), and one that loses some is told the
/// share. `windows` < 0: every example; else the first `windows` (evaluation's).
Reach reach(const TokenArray& data, const TokenMask& mask, const std::vector<int64_t>& starts,
            bool examples, int64_t seq_len, int64_t windows = -1) {
  Reach out;
  if (!examples) {
    out.trained = out.reached = data.size() > 1 ? mask.trained(1, data.size() - 1) : 0;
    return out;
  }
  const auto n = static_cast<int64_t>(starts.size());
  const int64_t count = windows < 0 ? n : std::min(n, windows);
  for (int64_t e = 0; e < count; ++e) {
    const int64_t start = starts[static_cast<size_t>(e)];
    const int64_t end = e + 1 < n ? starts[static_cast<size_t>(e + 1)] : data.size();
    if (end - start < 2) continue;
    out.trained += mask.trained(start + 1, end - start - 1);
    out.reached += mask.trained(start + 1, std::min(end - start, seq_len + 1) - 1);
  }
  return out;
}

void check_trained_targets(const JobConfig& c, const TokenData& d) {
  if (d.train_mask == nullptr) return;
  const bool examples = !c.sft_pack;
  const std::string why =
      examples ? fmt::format(
                     "data.sft_pack = false cuts each example after training.seq_len + 1 = {} "
                     "tokens: its prompts are longer? raise seq_len or pack the examples",
                     c.seq_len + 1)
               : std::string(
                     "the loss mask is 0 on every token: prepare the data again with "
                     "the assistant's turns in it");
  const Reach train = reach(*d.train, *d.train_mask, d.train_starts, examples, c.seq_len);
  VS_USER_CHECK(train.reached > 0,
                "config {}: data {}: the train split's windows hold no trained target ({} in "
                "the mask), so nothing would be learned and every loss would be a mean over "
                "nothing; {}",
                c.source, d.description, train.trained, why);
  if (train.reached < train.trained)
    log_rank0(
        "warning: config {}: data {}: {:.1f}% of the train split's trained targets ({} of "
        "{}) lie past the first training.seq_len + 1 = {} tokens of their example and are "
        "never trained (data.sft_pack = false cuts there)",
        c.source, d.description,
        100.0 * static_cast<double>(train.trained - train.reached) /
            static_cast<double>(train.trained),
        train.trained - train.reached, train.trained, c.seq_len + 1);
  const Reach val = reach(*d.val, *d.val_mask, d.val_starts, examples, c.seq_len, c.eval_windows);
  VS_USER_CHECK(val.reached > 0,
                "config {}: data {}: the validation windows (the first {} of data.eval_windows) "
                "hold no trained target, so val_loss would be a mean over nothing; {}",
                c.source, d.description, c.eval_windows, why);
}

}  // namespace

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
  check_trained_targets(c, d);
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
    if (counted_ == 0) {  // NOTE [Trained targets]: a batch of masked rows only
      log_rank0(
          "warning: step {}: its batch holds no trained target (each row's are masked or "
          "cut away): the step learns nothing, and its loss (0) is no mean to read",
          step + 1);
    }
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
