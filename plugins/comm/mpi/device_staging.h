// Device buffers for the mpi communicator. Debian's OpenMPI is not CUDA-aware, so a buffer on
// an accelerator travels through a host copy: copied out through the device's Compute, sent or
// reduced by MPI, copied back. The plugin never links the device's libraries: the core hands it
// the DevicePlugin (JoinOptions::device), whose AllocateHost gives page-locked memory.
// Host buffers never come here, so the CPU path is unchanged.
#ifndef TITAN_PLUGINS_COMM_MPI_DEVICE_STAGING_H_
#define TITAN_PLUGINS_COMM_MPI_DEVICE_STAGING_H_

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>

#include "absl/strings/string_view.h"
#include "titan/device.h"
#include "titan/status.h"
#include "titan/tensor_view.h"

namespace titan::mpi {

// Host blocks from one device, reused across operations: allocating page-locked memory costs
// far more than a copy. A block goes back to the pool when its last holder lets go, unless it
// was marked lost (MPI may still write it after a timeout); blocks live until the process exits.
class StagingPool : public std::enable_shared_from_this<StagingPool> {
 public:
  struct Block {
    void* data = nullptr;
    size_t bytes = 0;
    bool lost = false;  // never reused: a timed-out MPI request may still write it
  };
  static std::shared_ptr<StagingPool> Create(DevicePlugin& device);
  absl::StatusOr<std::shared_ptr<Block>> Acquire(size_t bytes);
  DevicePlugin& device() { return device_; }

 private:
  explicit StagingPool(DevicePlugin& device) : device_(device) {}
  void Release(Block* block);

  DevicePlugin& device_;
  std::mutex mutex_;
  std::multimap<size_t, Block*> free_;  // by size
};

// The host copy of one buffer for one operation.
struct StagedBuffer {
  TensorView host;  // what MPI reads and writes
  std::shared_ptr<StagingPool::Block> block;
};

bool OnDevice(const TensorView& view);

// A host copy of `view` (a device buffer of the pool's device), holding its bytes when
// `copy_in`. Waits for the device's queued work first, so the bytes are those of every kernel
// issued before the call.
absl::StatusOr<StagedBuffer> StageIn(StagingPool& pool, absl::string_view op,
                                     const TensorView& view, bool copy_in);
// Copies the host copy back into `view` and waits until the copy is done, so the block may be
// reused.
absl::Status StageOut(StagingPool& pool, const StagedBuffer& staged, TensorView view);

}  // namespace titan::mpi

#endif  // TITAN_PLUGINS_COMM_MPI_DEVICE_STAGING_H_
