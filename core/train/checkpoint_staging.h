// Checkpoint plugins read and write host bytes; a run on an accelerator keeps its model and
// optimizer state in device memory. These stage the pieces of such state through host copies,
// made by the device's own Compute, so a GPU run saves and resumes bit for bit. Pieces in host
// memory (the small train/... tensors, and everything on the CPU) are left as they are.
#ifndef TITAN_CORE_TRAIN_CHECKPOINT_STAGING_H_
#define TITAN_CORE_TRAIN_CHECKPOINT_STAGING_H_

#include <vector>

#include "titan/checkpoint.h"
#include "titan/compute.h"

namespace titan {

// Points every piece on `compute`'s device at a host copy of its bytes, kept in `owned`.
absl::Status StagePiecesToHost(Compute& compute, std::vector<CheckpointPiece>& pieces,
                               std::vector<std::vector<char>>& owned);

// For a load: Prepare points every device piece at a host buffer for the plugin to fill; Finish
// copies the buffers into device memory.
class LoadStaging {
 public:
  absl::Status Prepare(Compute& compute, std::vector<CheckpointPiece>& pieces);
  absl::Status Finish();

 private:
  Compute* compute_ = nullptr;
  std::vector<TensorView> targets_;  // the device views, in the order of host_
  std::vector<std::vector<char>> host_;
};

}  // namespace titan

#endif  // TITAN_CORE_TRAIN_CHECKPOINT_STAGING_H_
