// The mixture-of-experts kernels on raw device pointers (moe_kernels.cuh): routing and its
// backward, the permutation into expert-major order, dispatch, combine and their gradients, each
// CpuCompute's arithmetic in the same order (titan/compute_kernels.inc states it).
#ifndef TITAN_PLUGINS_DEVICE_CUDA_MOE_KERNELS_H_
#define TITAN_PLUGINS_DEVICE_CUDA_MOE_KERNELS_H_

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace titan::cuda {

// titan::MoeRouting in plain fields (nvcc sees no SDK header).
struct MoeRoutingArgs {
  bool sigmoid;
  int64_t top_k;
  bool normalize;
  float scale;
  int64_t groups, groups_chosen;
};

// logits [n, experts], bias [experts] or null; chosen i32 and weights f32 [n, top_k]. `scratch`
// holds MoeRouteScratchBytes.
size_t MoeRouteScratchBytes(int64_t n, int64_t experts, int64_t groups);
cudaError_t LaunchMoeRoute(const float* logits, const float* bias, const MoeRoutingArgs& routing,
                           int64_t n, int64_t experts, int32_t* chosen, float* weights,
                           void* scratch, cudaStream_t stream);
// d_logits [n, experts] overwritten; an expert id out of range passes no gradient.
cudaError_t LaunchMoeRouteBackward(const float* logits, const int32_t* chosen,
                                   const float* d_weights, const MoeRoutingArgs& routing, int64_t n,
                                   int64_t experts, float* d_logits, cudaStream_t stream);

// counts [experts] and slots [assignments] of the expert ids `ids` [assignments]. `scratch` holds
// MoePermuteScratchBytes; its first two int64 become the first assignment whose expert is out of
// range and that expert, or -1 and 0.
size_t MoePermuteScratchBytes(int64_t assignments, int64_t experts);
cudaError_t LaunchMoePermute(const int32_t* ids, int64_t assignments, int64_t experts,
                             int32_t* counts, int32_t* slots, void* scratch, cudaStream_t stream);

// x [n, d] (f32, or bf16 when `bf16`) to out [assignments, d]; a slot out of range is skipped.
cudaError_t LaunchMoeDispatch(const void* x, bool bf16, const int32_t* slots, void* out, int64_t n,
                              int64_t assignments, int64_t d, cudaStream_t stream);
cudaError_t LaunchMoeDispatchBackward(const float* d_out, const int32_t* slots, float* dx,
                                      int64_t n, int64_t assignments, int64_t d,
                                      cudaStream_t stream);
cudaError_t LaunchMoeCombine(const float* y, const float* weights, const int32_t* slots, float* out,
                             int64_t n, int64_t assignments, int64_t d, cudaStream_t stream);
cudaError_t LaunchMoeCombineBackward(const float* d_out, const float* y, const float* weights,
                                     const int32_t* slots, float* d_y, float* d_weights, int64_t n,
                                     int64_t assignments, int64_t d, cudaStream_t stream);

}  // namespace titan::cuda

#endif  // TITAN_PLUGINS_DEVICE_CUDA_MOE_KERNELS_H_
