// The checkpoint formats by name (checkpoint.format, /meta "format"), apart from
// checkpoint_format.h so that the job config names them without HDF5's headers.
#pragma once

#include <string>

#include "core/enum_names.h"

namespace vescale {

enum class CheckpointFormat { kSharded, kDeduped, kMerged };
/// CheckpointFormat <-> "sharded", "deduped", "merged".
const EnumNames<CheckpointFormat>& checkpoint_format_names();
CheckpointFormat parse_checkpoint_format(const std::string& text);
const char* checkpoint_format_name(CheckpointFormat format);

}  // namespace vescale
