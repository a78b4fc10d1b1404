// TensorBoard's event files without TensorFlow (metrics.tensorboard): each metrics line as one
// Event of scalar summaries, in the TFRecord framing TensorBoard reads.
//
// NOTE [TensorBoard events]
// A file events.out.tfevents.<seconds>.<host>.<pid> in the dump folder holds records, each
//   uint64 length | uint32 masked CRC-32C of those 8 bytes | data | uint32 masked CRC-32C of data
// (little-endian; masked = ((crc >> 15) | (crc << 17)) + 0xa282ead8), and each record's data is an
// Event protobuf written by hand: wall_time (field 1, double), step (2, int64), and first
// file_version "brain.Event:2" (3, string), then summary (5, message) with one Value (1) per
// scalar: tag (1, string) and simple_value (2, float). Scalars: loss, val_loss, lr, grad_norm,
// tokens_per_s, mfu, step_time_s, mem_bytes, state_bytes/<kind>, comm_bytes/<mesh dim>,
// time_s/<phase> and comm_wait_s/<mesh dim> (NOTE [Step anatomy]).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "train/metrics.h"

namespace vescale {

/// One TFRecord: the framing around `data`.
std::string tfrecord(const std::string& data);
/// An Event of `scalars` (tag, value) at `step` and `wall_time` (seconds since the epoch).
std::string scalar_event(double wall_time, int64_t step,
                         const std::vector<std::pair<std::string, double>>& scalars);
/// The scalars of a metrics line, as TensorBoard shows them.
std::vector<std::pair<std::string, double>> metrics_scalars(const StepMetrics& m);

/// Appends an event per metrics line to a new events file in `folder` (rank 0 only: others
/// pass ""). Created at the first line; a failed write is logged once and recording stops.
class TensorBoardWriter {
 public:
  explicit TensorBoardWriter(std::string folder);
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;
  ~TensorBoardWriter();
  void write(const StepMetrics& m);
  /// The events file (empty before the first line).
  const std::string& path() const { return path_; }

 private:
  std::string folder_, path_;
  int fd_ = -1;
  bool failed_ = false;
};

}  // namespace vescale
