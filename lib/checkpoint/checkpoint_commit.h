// How a step folder becomes a checkpoint (NOTE [Checkpoint integrity]): rank 0 opens it afresh,
// every rank writes its files into it, and once all are written COMMIT, then `latest`, then the
// pruning of older steps. Internal to checkpoint/.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "checkpoint/checkpoint_format.h"
#include "comm/group.h"

namespace vescale::detail {

/// Rank 0 creates <dir>/step-XXXXXX (refusing a committed one); every rank waits for it.
/// *Collective* over `world`. Returns the step folder.
std::filesystem::path prepare_folder(const std::string& dir, const CheckpointMeta& meta,
                                     const comm::Group& world);

/// Once every rank's files are complete: COMMIT, then `latest`, then pruning to the newest `keep`
/// committed steps (rank 0). *Collective* over `group`.
void commit(const std::filesystem::path& dir, const std::filesystem::path& folder,
            const CheckpointMeta& meta, int64_t keep, const comm::Group& group);

}  // namespace vescale::detail
