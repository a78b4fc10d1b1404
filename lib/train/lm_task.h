// Language modelling for the GPT: next-token cross entropy on a token stream (text bytes, a
// nanoGPT .bin, or a synthetic sequence), windows of seq_len tokens at offsets drawn from
// (seed, step, row).
#pragma once

#include "models/gpt.h"
#include "train/task.h"

namespace vescale {

/// The job's token data (data.source), checked: tokens within model.vocab_size, a train split
/// longer than seq_len + 1, at least one validation window. Files are mapped and scanned only
/// boundedly (NOTE [Vocabulary check]), so this is cheap enough for `plan lint` and the launcher.
TokenData load_job_tokens(const JobConfig& config);

class LMTask : public Task {
 public:
  /// Builds the GPT of `config` and loads its token data.
  explicit LMTask(const JobConfig& config);

  std::shared_ptr<Module> model() const override { return model_; }
  std::string data_description() const override { return tokens_.description; }
  Batch train_batch(int64_t step, const BatchSlice& slice) override;
  int64_t val_batches(int64_t limit) const override;
  Batch val_batch(int64_t index) override;
  Tensors inputs(const Batch& batch, const DeviceMesh& mesh) const override;
  DTensor loss(const Tensors& outputs, const Batch& batch, const DeviceMesh& mesh) const override;
  double tokens_per_sample() const override { return static_cast<double>(seq_len_); }
  std::vector<Layer> layers() const override;
  Tensors run_layers(int64_t first, int64_t end, const Tensors& inputs) const override {
    return model_->run_layers(first, end, inputs);
  }

 private:
  std::shared_ptr<models::GPT> model_;
  TokenData tokens_;
  uint64_t seed_;
  int64_t seq_len_;
};

/// The GPT's layers for sequences of `seq_len` tokens: the embeddings, each block, the head with
/// the loss (LMTask::layers(), also without a task).
std::vector<Layer> gpt_layers(models::GPT& model, int64_t seq_len);

}  // namespace vescale
