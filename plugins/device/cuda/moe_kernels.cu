#include "moe_kernels.cuh"
#include "moe_kernels.h"

namespace titan::cuda {

size_t MoeRouteScratchBytes(int64_t n, int64_t experts, int64_t groups) {
  return moe::RouteScratchBytes(n, experts, groups);
}

cudaError_t LaunchMoeRoute(const float* logits, const float* bias, const MoeRoutingArgs& routing,
                           int64_t n, int64_t experts, int32_t* chosen, float* weights,
                           void* scratch, cudaStream_t stream) {
  return moe::RunRoute(StreamLaunch{stream}, logits, bias, routing, n, experts, chosen, weights,
                       scratch);
}

cudaError_t LaunchMoeRouteBackward(const float* logits, const int32_t* chosen,
                                   const float* d_weights, const MoeRoutingArgs& routing, int64_t n,
                                   int64_t experts, float* d_logits, cudaStream_t stream) {
  return moe::RunRouteBackward(StreamLaunch{stream}, logits, chosen, d_weights, routing, n, experts,
                               d_logits);
}

size_t MoePermuteScratchBytes(int64_t assignments, int64_t experts) {
  return moe::PermuteScratchBytes(assignments, experts);
}

cudaError_t LaunchMoePermute(const int32_t* ids, int64_t assignments, int64_t experts,
                             int32_t* counts, int32_t* slots, void* scratch, cudaStream_t stream) {
  return moe::RunPermute(StreamLaunch{stream}, ids, assignments, experts, counts, slots, scratch);
}

cudaError_t LaunchMoeDispatch(const void* x, bool bf16, const int32_t* slots, void* out, int64_t n,
                              int64_t assignments, int64_t d, cudaStream_t stream) {
  return moe::RunDispatch(StreamLaunch{stream}, x, bf16, slots, out, n, assignments, d);
}

cudaError_t LaunchMoeDispatchBackward(const float* d_out, const int32_t* slots, float* dx,
                                      int64_t n, int64_t assignments, int64_t d,
                                      cudaStream_t stream) {
  return moe::RunDispatchBackward(StreamLaunch{stream}, d_out, slots, dx, n, assignments, d);
}

cudaError_t LaunchMoeCombine(const float* y, const float* weights, const int32_t* slots, float* out,
                             int64_t n, int64_t assignments, int64_t d, cudaStream_t stream) {
  return moe::RunCombine(StreamLaunch{stream}, y, weights, slots, out, n, assignments, d);
}

cudaError_t LaunchMoeCombineBackward(const float* d_out, const float* y, const float* weights,
                                     const int32_t* slots, float* d_y, float* d_weights, int64_t n,
                                     int64_t assignments, int64_t d, cudaStream_t stream) {
  return moe::RunCombineBackward(StreamLaunch{stream}, d_out, y, weights, slots, d_y, d_weights, n,
                                 assignments, d);
}

}  // namespace titan::cuda
