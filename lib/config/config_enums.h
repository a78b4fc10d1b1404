// The enumerated config keys' values (issue [27]): the schema parses each key's name once into its
// enum, so nothing past lib/config/ compares a config value as text. One EnumNames table per enum
// gives its names both ways, "did you mean" and the choices a key's help lists.
#pragma once

#include <c10/core/ScalarType.h>

#include "checkpoint/checkpoint_format_names.h"
#include "comm/backend.h"
#include "core/device.h"
#include "core/enum_names.h"

namespace vescale {

/// What a transformer block recomputes in its backward (training.activation_checkpoint).
enum class Recompute {
  kNone,       ///< nothing: every activation is kept
  kFull,       ///< the whole block from its input
  kSelective,  ///< the attention core from q, k and v
};

/// The learning rate after warmup (lr_scheduler.decay).
enum class LrDecay { kCosine, kConstant };

/// optimizer.name.
enum class OptimizerKind { kAdamW, kSgd, kMuon };

/// optimizer.muon_scale: Muon's update scale for a rows x cols matrix (NOTE [Muon]).
enum class MuonScale {
  kAdamWRms,  ///< "adamw_rms": 0.2 sqrt(max(rows, cols)), AdamW's update RMS (Moonlight)
  kShape,     ///< "shape": sqrt(max(1, rows / cols)) (Keller Jordan's)
};

/// Where the batches come from (data.source).
enum class DataSource {
  kSynthetic,  ///< generated from (seed, step)
  kText,       ///< a UTF-8 file, one token a byte
  kTokens,     ///< nanoGPT's train.bin and val.bin (uint16)
};

/// The pipeline schedule (parallel.pp_schedule); its names are pipeline::schedule_names().
enum class PpSchedule { kGPipe, k1F1B, kInterleaved1F1B, kZbv, kZbH1 };

/// What a step whose loss or gradient norm is not finite does (training.on_nonfinite).
enum class OnNonfinite { kStop, kSkip };

/// Each enum's table, overloaded on the enum (the argument's value is not read), so that the
/// schema's code for every enumerated key is one template.
const EnumNames<Recompute>& names_of(Recompute);
const EnumNames<LrDecay>& names_of(LrDecay);
const EnumNames<OptimizerKind>& names_of(OptimizerKind);
const EnumNames<MuonScale>& names_of(MuonScale);
const EnumNames<DataSource>& names_of(DataSource);
const EnumNames<PpSchedule>& names_of(PpSchedule);
const EnumNames<OnNonfinite>& names_of(OnNonfinite);
/// training.dtype: float32, float64 or bfloat16 (core's dtype_names() also has float16).
const EnumNames<c10::ScalarType>& names_of(c10::ScalarType);
// The keys whose enums live where they are used.
inline const EnumNames<DeviceSetting>& names_of(DeviceSetting) {
  return device_setting_names();
}
inline const EnumNames<comm::Backend>& names_of(comm::Backend) {
  return comm::backend_names();
}
inline const EnumNames<CheckpointFormat>& names_of(CheckpointFormat) {
  return checkpoint_format_names();
}

/// The config's name of `value`: "selective", "zb-h1".
template <typename E>
const char* config_name(E value) {
  return names_of(value).name(value);
}

}  // namespace vescale
