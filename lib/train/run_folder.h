// A training run's dump folder, claimed for it before the first step (NOTE [One run per dump
// folder]).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "checkpoint/folder_lock.h"
#include "comm/group.h"
#include "train/job.h"

namespace vescale {

// NOTE [One run per dump folder]
// A training run owns its dump folder while it runs: rank 0 holds an flock on
// <dump_folder>/LOCK from before anything is written there until its process ends, whatever the
// checkpoint settings (a run with checkpoint.interval = 0 still writes metrics.jsonl, and saves
// when preempted). Before the first step rank 0 also makes the folder's contents this run's:
// - checkpoints/: another run's committed steps, or this run's newer than the step it resumes
//   from, are refused, or deleted with checkpoint.overwrite (train/run_id.h);
// - metrics.jsonl: a file another run wrote (its first line's run_id differs, or has none) is
//   moved aside to metrics.<its run id>.jsonl, so a file holds one run's lines, each carrying
//   that run id; a symbolic link there is refused, and the file is opened without following one.
//   A run resumed from a checkpoint of step s keeps its file but drops the lines after step s
//   (and a torn last line), rewritten atomically: the steps after the checkpoint were lost and
//   run again, so the file ends with one line per logged step, however often the job restarted.
//   (TensorBoard's event files are left as they are: a resumed run writes a new one beside them.)

/// Makes `path` (<dump_folder>/metrics.jsonl) run `run_id`'s before its first line: refuses a
/// symbolic link, moves another run's file aside, and for a run resumed from a checkpoint of step
/// `resumed_from` drops its lines after that step (NOTE [One run per dump folder]). Rank 0 only.
void claim_metrics_file(const std::filesystem::path& path, const std::string& run_id,
                        std::optional<int64_t> resumed_from);

/// The dump folder, claimed for this run (NOTE [One run per dump folder]).
class RunFolder {
 public:
  /// Takes the folder's LOCK and makes checkpoints/ and metrics.jsonl this run's, which goes on
  /// from `start_step` (`resumed`: from a loaded checkpoint), then sets job.run_id (a loaded
  /// checkpoint's, else drawn by rank 0). *Collective*: rank 0 decides and every rank throws
  /// when it failed.
  RunFolder(Job& job, const comm::Group& world, bool resumed, int64_t start_step);

  /// <dump_folder>/metrics.jsonl on rank 0, "" on the other ranks.
  const std::string& metrics_path() const { return metrics_path_; }

 private:
  FolderLock lock_;  ///< rank 0's
  std::string metrics_path_;
};

}  // namespace vescale
