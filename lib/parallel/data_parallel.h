// Data parallel: gradients averaged over the dp group by bucketed all-reduces that gradient hooks
// launch during backward, so communication overlaps the rest of the backward pass (like
// PyTorch DDP). Composes with tensor parallel: each dp rank holds the same tp shards.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "comm/group.h"
#include "dtensor/dtensor.h"

namespace vescale {

class DataParallel {
 public:
  /// Buckets of about `bucket_bytes`, filled in reverse parameter order (the order gradients
  /// become ready). Installs the gradient hooks.
  DataParallel(std::vector<DTensor*> params, comm::Group dp_group, int64_t bucket_bytes);

  /// Arms the hooks: the next backward (the last micro-batch's) launches the all-reduces.
  void arm();
  /// Launches what the hooks did not (parameters without gradient), waits, and writes the
  /// averaged gradients. *Collective* over the dp group. Returns how many buckets the hooks
  /// launched during backward (overlapped).
  int finish();

  int buckets() const { return static_cast<int>(buckets_.size()); }

 private:
  struct Bucket {
    std::vector<size_t> params;
    std::vector<int64_t> offsets;
    int64_t numel = 0;
    at::Tensor flat;
    int ready = 0;
    bool launched = false;
    comm::Work work;
  };
  void on_grad(size_t param, const at::Tensor& grad);
  void launch_ready();
  void fill(size_t param, const at::Tensor& grad);

  std::vector<DTensor*> params_;
  comm::Group group_;
  std::vector<Bucket> buckets_;
  std::vector<std::pair<size_t, size_t>> where_;  // param -> (bucket, slot)
  std::vector<bool> filled_;
  bool armed_ = false;
  int launched_in_backward_ = 0;
  std::mutex mutex_;
};

}  // namespace vescale
