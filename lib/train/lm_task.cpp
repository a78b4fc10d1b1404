#include "train/lm_task.h"

#include "core/error.h"
#include "train/model_factory.h"

namespace vescale {
TokenData load_job_tokens(const JobConfig& c) {
  TokenData d = c.data_source == "text" ? load_text_tokens(c.data_path, c.val_fraction)
                : c.data_source == "tokens"
                    ? load_bin_tokens(c.data_path, c.vocab_size)
                    : synthetic_tokens(c.vocab_size, static_cast<uint64_t>(c.seed));
  VS_USER_CHECK(d.vocab_size <= c.vocab_size,
                "config {}: data {} has tokens up to {} but model.vocab_size = {}", c.source,
                d.description, d.vocab_size - 1, c.vocab_size);
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
    : model_(std::static_pointer_cast<models::GPT>(build_model(c))),
      tokens_(load_job_tokens(c)),
      seed_(static_cast<uint64_t>(c.seed)),
      seq_len_(c.seq_len) {}

Batch LMTask::train_batch(int64_t step, const BatchSlice& slice) {
  models::DropoutState& dropout = model_->dropout_state();
  dropout.training = true;
  dropout.counter = static_cast<uint64_t>(step);
  dropout.row_offset = slice.row_offset;
  dropout.global_rows = slice.global_rows;
  auto [x, y] = token_batch(*tokens_.train, seed_, step, seq_len_, slice);
  return {x, y};
}

int64_t LMTask::val_batches(int64_t limit) const {
  return std::min(limit, val_windows_available(*tokens_.val, seq_len_));
}

Batch LMTask::val_batch(int64_t index) {
  model_->dropout_state().training = false;
  auto [x, y] = val_window(*tokens_.val, index, seq_len_);
  return {x, y};
}

Tensors LMTask::inputs(const Batch& batch, const DeviceMesh& mesh) const {
  return {distribute_tensor(batch.inputs.to(mesh.device()), mesh,
                            Placements(mesh.ndim(), Placement::replicate()))};
}

DTensor LMTask::loss(const Tensors& outputs, const Batch& batch, const DeviceMesh& mesh) const {
  const DTensor targets = distribute_tensor(batch.targets.to(mesh.device()), mesh,
                                            Placements(mesh.ndim(), Placement::replicate()));
  return models::lm_loss(outputs.at(0), targets);
}

std::vector<Layer> LMTask::layers() const {
  return gpt_layers(*model_, seq_len_);
}

std::vector<Layer> gpt_layers(models::GPT& model, int64_t seq_len) {
  // 6 FLOPs per parameter per token for the matmuls forward and backward, plus attention's
  // 12 C T per token and block. The tied wte/lm_head weight is the head's matmul.
  const models::GPTConfig& g = model.config();
  const double t = static_cast<double>(seq_len), c = static_cast<double>(g.n_embd);
  auto params = [&](const std::vector<std::string>& modules) {
    return static_cast<double>(parameters_under(model, modules));
  };
  std::vector<Layer> out;
  const std::vector<std::string> embedding{"transformer.wte", "transformer.wpe",
                                           "transformer.drop"};
  out.push_back({"embedding", embedding, 6.0 * t * params({"transformer.wpe"})});
  for (int64_t i = 0; i < g.n_layer; ++i) {
    const std::string block = "transformer.h." + std::to_string(i);
    out.push_back({block, {block}, t * (6.0 * params({block}) + 12.0 * c * t)});
  }
  const std::vector<std::string> head{"transformer.ln_f", "lm_head"};
  out.push_back({"head", head, 6.0 * t * params({"transformer.ln_f", "transformer.wte"})});
  return out;
}

}  // namespace vescale
