// HDF5 checkpoints (docs/design.md §10): sharded (every rank writes all its local state), deduped
// (each unique shard written once, writers spread over its replicas) and merged (full tensors, one
// file). Every shard dataset carries global_shape, global_offset, placements, mesh_shape,
// mesh_dims and replica_id, so a checkpoint loads under any mesh and plan (each rank reads only the
// hyperslabs it needs) and merges without knowing the layout that wrote it.
#pragma once

#include "checkpoint/checkpoint_format.h"  // formats, version, /meta, pieces
#include "checkpoint/checkpoint_merge.h"   // merge_checkpoint
#include "checkpoint/checkpoint_reader.h"  // CheckpointReader, read_checkpoint_meta
#include "checkpoint/checkpoint_writer.h"  // save_checkpoint, snapshot_checkpoint, write_snapshot
