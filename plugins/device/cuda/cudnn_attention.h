// The cuda compute's state for cuDNN's fused attention: the library, the handle on the compute
// stream, one finalized plan per shape, and the log lines already written (each says once which
// attention runs and, where the tiled kernels do, why).
#ifndef TITAN_PLUGINS_DEVICE_CUDA_CUDNN_ATTENTION_H_
#define TITAN_PLUGINS_DEVICE_CUDA_CUDNN_ATTENTION_H_

#include <memory>
#include <set>
#include <string>

#include "cudnn_library.h"
#include "cudnn_sdpa.h"
#include "gemm_plan_cache.h"

namespace titan::cuda {

struct CudnnAttention {
  CudnnAttention() = default;
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;
  ~CudnnAttention() {
    forward_plans.reset();  // the plans before the handle they were built with
    backward_plans.reset();
    if (handle != nullptr) cudnn->Destroy(handle);
  }

  const Cudnn* cudnn = nullptr;
  cudnnHandle_t handle = nullptr;
  // Plans by shape; a shape cuDNN refused is remembered, so it is asked once. A few shapes a run
  // (generation adds one per length).
  using Plans = PlanCache<SdpaPlan, SdpaShape, SdpaShapeHash>;
  std::unique_ptr<Plans> forward_plans = std::make_unique<Plans>(64);
  std::unique_ptr<Plans> backward_plans = std::make_unique<Plans>(64);
  std::set<std::string> logged;
};

}  // namespace titan::cuda

#endif  // TITAN_PLUGINS_DEVICE_CUDA_CUDNN_ATTENTION_H_
