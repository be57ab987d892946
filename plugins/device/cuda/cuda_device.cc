// The CUDA device: device memory, copies and the compute kernels (cuda_compute.h) of the
// selected GPU. Every CUDA error becomes a Status naming the call and CUDA's own message, so a
// machine without a GPU gets an explanation, not a crash.
#include <cuda_runtime.h>

#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "attention_route.h"
#include "cuda_compute.h"
#include "cuda_status.h"
#include "fill_kernel.h"
#include "titan/device.h"

namespace titan::cuda {

class CudaDevice : public DevicePlugin {
 public:
  // Keys of the [job] section when job.device = "cuda".
  std::vector<ConfigKey> ConfigKeys() const override {
    return {ConfigKey{"tf32",
                      ConfigType::kBool,
                      ConfigValue(false),
                      "let f32 GEMMs use TF32 tensor cores (faster; about 1e-3 relative error "
                      "instead of f32's 1e-6)",
                      {},
                      {},
                      {}},
            ConfigKey{"attention",
                      ConfigType::kString,
                      ConfigValue(std::string("auto")),
                      "attention, forward and backward: auto (cuDNN's fused flash attention in "
                      "bf16 where it "
                      "applies in a bf16 run, else titan's tiled f32 kernels), cudnn (where it "
                      "applies, in any run) or tiled (always titan's f32 kernels)",
                      {},
                      {},
                      {"auto", "cudnn", "tiled"}}};
  }

  // A key the view lacks keeps its value (the recipe passes every key; tests pass some).
  absl::Status Configure(const ConfigView& config) override {
    if (config.Has("tf32")) {
      TITAN_ASSIGN_OR_RETURN(bool tf32, config.GetBool("tf32"));
      compute_.set_allow_tf32(tf32);
    }
    if (config.Has("attention")) {
      TITAN_ASSIGN_OR_RETURN(std::string value, config.GetString("attention"));
      absl::StatusOr<AttentionMode> mode = ParseAttentionMode(value);
      if (!mode.ok()) return config.Error("attention", mode.status().message());
      compute_.set_attention_mode(*mode);
    }
    return absl::OkStatus();
  }

  DeviceType type() const override { return DeviceType::kCuda; }

  int DeviceCount() const override {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      cudaGetLastError();  // clear the sticky "no device / no driver" error
      return 0;
    }
    return count;
  }

  absl::Status Select(int index) override {
    int count = DeviceCount();
    if (index < 0 || index >= count) {
      return absl::InvalidArgumentError(absl::StrCat("cuda: device ", index, " does not exist; ",
                                                     count, " CUDA device(s) are visible"));
    }
    return Check(cudaSetDevice(index), "cudaSetDevice");
  }

  absl::StatusOr<void*> Allocate(size_t bytes) override {
    void* pointer = nullptr;
    TITAN_RETURN_IF_ERROR(CheckAllocation(cudaMalloc(&pointer, bytes), "a device buffer", bytes));
    std::lock_guard<std::mutex> lock(mutex_);
    sizes_[pointer] = bytes;
    allocated_ += bytes;
    peak_ = std::max(peak_, allocated_);
    return pointer;
  }

  absl::Status Free(void* pointer) override {
    if (pointer == nullptr) return absl::OkStatus();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = sizes_.find(pointer);
      if (it == sizes_.end()) {
        return absl::InvalidArgumentError("cuda: Free of a pointer this device did not allocate");
      }
      allocated_ -= it->second;
      sizes_.erase(it);
    }
    return Check(cudaFree(pointer), "cudaFree");
  }

  absl::Status CopyToDevice(void* device_dst, const void* host_src, size_t bytes) override {
    return Check(cudaMemcpy(device_dst, host_src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  }

  absl::Status CopyToHost(void* host_dst, const void* device_src, size_t bytes) override {
    return Check(cudaMemcpy(host_dst, device_src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  }

  absl::Status FillF32(float* device_dst, size_t count, float value) override {
    return Check(LaunchFillF32(device_dst, count, value, nullptr), "fill kernel launch");
  }

  absl::Status Synchronize() override {
    return Check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }

  absl::StatusOr<DeviceMemoryInfo> MemoryInfo() override {
    DeviceMemoryInfo info;
    TITAN_RETURN_IF_ERROR(
        Check(cudaMemGetInfo(&info.free_bytes, &info.total_bytes), "cudaMemGetInfo"));
    std::lock_guard<std::mutex> lock(mutex_);
    info.peak_allocated_bytes = peak_;
    info.peak_reserved_bytes = peak_;  // cudaMalloc per tensor: nothing is held beyond them
    return info;
  }

  // Usable before Select: the first kernel call binds it to the device selected then.
  Compute* compute() override { return &compute_; }

  // Page-locked, so the mpi communicator's staging copies run at full PCIe speed.
  absl::StatusOr<void*> AllocateHost(size_t bytes) override {
    void* pointer = nullptr;
    TITAN_RETURN_IF_ERROR(Check(cudaMallocHost(&pointer, bytes), "cudaMallocHost"));
    return pointer;
  }
  absl::Status FreeHost(void* pointer) override {
    return Check(cudaFreeHost(pointer), "cudaFreeHost");
  }

 private:
  CudaCompute compute_;
  std::mutex mutex_;
  std::unordered_map<void*, size_t> sizes_;  // live allocations, for the peak
  size_t allocated_ = 0;
  size_t peak_ = 0;
};

}  // namespace titan::cuda

TITAN_PLUGIN(titan::DevicePlugin, titan::cuda::CudaDevice, "cuda", "0.1.0",
             "NVIDIA GPUs through the CUDA runtime")
