// Language modelling for next-token families: next-token cross entropy on a token stream (text
// bytes, a nanoGPT .bin, or a synthetic sequence), windows of seq_len tokens at offsets drawn from
// (seed, step, row); on fine-tuning data only the targets its loss mask trains (NOTE [Loss
// masks]).
#pragma once

#include "train/task.h"

namespace vescale {

/// The job's token data (data.source), checked: tokens within model.vocab_size, a train split
/// longer than seq_len + 1, at least one validation window. Files are mapped and scanned only
/// boundedly (NOTE [Vocabulary check]), so this is cheap enough for `plan lint` and the launcher.
TokenData load_job_tokens(const JobConfig& config);

class LMTask : public Task {
 public:
  /// Builds the model of `config` and loads its token data.
  explicit LMTask(const JobConfig& config);

  std::shared_ptr<Module> model() const override { return model_; }
  std::string data_description() const override { return tokens_.description; }
  Batch train_batch(int64_t step, const BatchSlice& slice) override;
  int64_t val_batches(int64_t limit) const override;
  Batch val_batch(int64_t index) override;
  Tensors inputs(const Batch& batch, const DeviceMesh& mesh) const override;
  DTensor loss(const Tensors& outputs, const Batch& batch, const DeviceMesh& mesh) const override;
  bool fuses_loss() const override { return fused_loss_; }
  double tokens_per_sample() const override { return static_cast<double>(seq_len_); }
  std::vector<Layer> layers() const override { return layers_; }
  std::optional<RouterStats> router_stats(int64_t step) const override {
    return layered_.router_stats(step);
  }
  Tensors run_layers(int64_t first, int64_t end, const Tensors& inputs,
                     const ForwardContext& context) const override {
    return layered_.run_layers(first, end, inputs, context);
  }

 private:
  /// Fine-tuning data: rows of examples rather than windows (data.sft_pack = false).
  bool examples() const { return !pack_ && tokens_.train_mask != nullptr; }
  /// A loss mask's normalizer of step `step`'s micro-batch `slice` (NOTE [Loss masks]).
  double train_normalizer(int64_t step, const BatchSlice& slice);
  /// A loss mask's normalizer of the validation windows.
  double val_normalizer();

  std::shared_ptr<Module> model_;
  LayeredModel& layered_;
  std::vector<Layer> layers_;
  TokenData tokens_;
  uint64_t seed_;
  int64_t seq_len_;
  bool fused_loss_;  ///< training.fused_loss
  bool pack_;        ///< data.sft_pack
  int64_t cp_;       ///< the context-parallel ranks a row's targets are split over
  int64_t eval_windows_;
  int64_t counted_step_ = -1, counted_ = 0;  ///< the last step's trained targets
  int64_t val_counted_ = -1;                 ///< the validation windows' trained targets
};

}  // namespace vescale
