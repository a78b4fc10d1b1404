// The training state as checkpoint tensors, and saving and loading it: parameters from the
// parallelized model, optimizer state from the optimizer (each with its own global place), the
// rest in /meta.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "checkpoint/async_writer.h"
#include "checkpoint/checkpoint.h"
#include "hf/lora_base.h"
#include "train/job.h"

namespace vescale {

// NOTE [Async checkpoints]
// With checkpoint.async, a save copies what this rank writes to host memory on the training thread
// (merged: the writer gathers full tensors one at a time and keeps them; the others keep nothing)
// and hands the copy to one background thread, which writes and commits it with the same protocol
// as a synchronous save (files under temporary names, synced and renamed; a barrier; COMMIT;
// latest; pruning) while training goes on. The background thread's barriers (and a merged save's
// turns) go over a group of its own, split once from the world group: never the groups training
// uses, since Gloo collectives of two threads on one group would interleave. So COMMIT is written
// only once every rank's files are complete, and a crash mid-write leaves `latest` at the previous
// committed step. The next save, the end of training and the destructor (an error unwinding)
// wait for the write in flight; loads happen before the first save.

/// Saves the job's state to <dump_folder>/checkpoints
/// (checkpoint.format, pruned to checkpoint.keep), in the training thread or, with
/// checkpoint.async, in the background (NOTE [Async checkpoints]), and logs each save's size,
/// write time and throughput and how long training stalled for it.
class JobCheckpointer {
 public:
  /// Saves into a dump folder claimed for the run (train/run_folder.h).
  JobCheckpointer(Job& job, const comm::Group& world);
  /// Waits for a write in flight (logging, not throwing, its failure).
  ~JobCheckpointer() = default;

  /// Saves the state after `step` steps (async: waits for the previous save first). *Collective.*
  void save(int64_t step);
  /// Waits until the write in flight is committed (on every rank); rethrows its failure.
  void finish();

 private:
  Job& job_;
  const comm::Group& world_;
  std::optional<comm::Group> writer_group_;  ///< the background thread's barriers (async)
  AsyncWriter writer_;                       ///< last: destroyed (waited for) first
};

/// Loads the parameters of checkpoint `path` into where their state lives on this rank
/// (ParallelModel::state), reading only the hyperslabs it holds; each tensor's stored dtype must
/// be the state's (an evaluation of a bf16 model rounds the float32 state). The checkpoint must be
/// of this model. "hf:DIR": load_model_from_hf. A LoRA model (NOTE [LoRA]) loads a LoRA
/// checkpoint's base (checked against its checksum) and then its adapters, or a base alone.
void load_model(ParallelModel& model, const std::string& path);

/// Loads a LoRA model's frozen base (NOTE [LoRA]) from `base.source`: a checkpoint of this model
/// without adapters, or "hf:DIR". `base` is lora_base_of() the source, or a checkpoint's
/// recorded base after check_lora_base: its files are read for their checksum once.
void load_lora_base(ParallelModel& model, const LoraBase& base);

/// Loads the adapters of the peft folder `folder` (lora.adapter, NOTE [PEFT adapters]) into where
/// the model's adapters' state lives.
void load_peft_adapter(ParallelModel& model, const std::string& folder);

/// The base a LoRA checkpoint at `path` adapts; nullopt for any other checkpoint and "hf:DIR".
std::optional<LoraBase> recorded_lora_base(const std::string& path);

/// Loads the parameters from a Hugging Face folder ("hf:DIR": config.json checked against the
/// model, tensors mapped by the family's layout), each rank reading its boxes, cast to the state's
/// dtype.
void load_model_from_hf(ParallelModel& model, const std::string& path);

/// Resumes `job` from a checkpoint saved by train: its parameters (load_model) and optimizer
/// state, which must be there; the checkpoint's run must have this job's optimizer and training
/// keys. Keeps the checkpoint's run id (job.run_id). Returns the step to continue from.
int64_t load_job(Job& job, const CheckpointReader& reader);

/// <dump_folder>/checkpoints/latest when a step there is committed, else nullopt.
std::optional<std::string> newest_checkpoint(const std::string& dump_folder);

/// checkpoint.load as a path ("latest": the newest committed step of this job's dump folder);
/// nullopt when the job starts from step 0: no checkpoint.load, or "latest" where no step is
/// committed yet (said in the log). An explicit path is returned as it is, there or not.
std::optional<std::string> resolve_load_path(const JobConfig& config);

}  // namespace vescale
