#include "config/config_enums.h"

namespace vescale {

const EnumNames<Recompute>& names_of(Recompute) {
  static const EnumNames<Recompute> names("training.activation_checkpoint",
                                          {{Recompute::kNone, "none"},
                                           {Recompute::kFull, "full"},
                                           {Recompute::kSelective, "selective"}});
  return names;
}

const EnumNames<LrDecay>& names_of(LrDecay) {
  static const EnumNames<LrDecay> names(
      "lr_scheduler.decay", {{LrDecay::kCosine, "cosine"}, {LrDecay::kConstant, "constant"}});
  return names;
}

const EnumNames<OptimizerKind>& names_of(OptimizerKind) {
  static const EnumNames<OptimizerKind> names("optimizer.name", {{OptimizerKind::kAdamW, "adamw"},
                                                                 {OptimizerKind::kSgd, "sgd"},
                                                                 {OptimizerKind::kMuon, "muon"}});
  return names;
}

const EnumNames<MuonScale>& names_of(MuonScale) {
  static const EnumNames<MuonScale> names(
      "optimizer.muon_scale", {{MuonScale::kAdamWRms, "adamw_rms"}, {MuonScale::kShape, "shape"}});
  return names;
}

const EnumNames<DataSource>& names_of(DataSource) {
  static const EnumNames<DataSource> names("data.source", {{DataSource::kSynthetic, "synthetic"},
                                                           {DataSource::kText, "text"},
                                                           {DataSource::kTokens, "tokens"}});
  return names;
}

const EnumNames<PpSchedule>& names_of(PpSchedule) {
  static const EnumNames<PpSchedule> names("parallel.pp_schedule",
                                           {{PpSchedule::kGPipe, "gpipe"},
                                            {PpSchedule::k1F1B, "1f1b"},
                                            {PpSchedule::kInterleaved1F1B, "interleaved-1f1b"},
                                            {PpSchedule::kZbv, "zbv"},
                                            {PpSchedule::kZbH1, "zb-h1"}});
  return names;
}

const EnumNames<OnNonfinite>& names_of(OnNonfinite) {
  static const EnumNames<OnNonfinite> names(
      "training.on_nonfinite", {{OnNonfinite::kStop, "stop"}, {OnNonfinite::kSkip, "skip"}});
  return names;
}

const EnumNames<c10::ScalarType>& names_of(c10::ScalarType) {
  static const EnumNames<c10::ScalarType> names(
      "training.dtype",
      {{c10::kFloat, "float32"}, {c10::kDouble, "float64"}, {c10::kBFloat16, "bfloat16"}});
  return names;
}

}  // namespace vescale
