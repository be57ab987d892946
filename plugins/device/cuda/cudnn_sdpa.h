// Causal grouped-query attention through cuDNN's fused flash attention (its "SDPA" engines), built
// with the backend (graph) API: the graph cuDNN's frontend lowers
// scaled_dot_product_flash_attention to, written out here op by op. Operands are bf16 on the device
// in titan's layouts, read through strides: q, out [batch, seq, heads, head_dim]; k, v [batch, seq,
// kv_heads, head_dim]; the statistics f32 [batch, heads, seq], each softmax row's natural-log
// log-sum-exp of the scaled scores, as titan's own kernels save it for the backward and for context
// parallelism's merge.
#ifndef TITAN_PLUGINS_DEVICE_CUDA_CUDNN_SDPA_H_
#define TITAN_PLUGINS_DEVICE_CUDA_CUDNN_SDPA_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "cudnn_library.h"

namespace titan::cuda {

// What a plan depends on: a causal self-attention (queries and keys of one sequence).
struct SdpaShape {
  int64_t batch = 0, seq_len = 0, heads = 0, kv_heads = 0, head_dim = 0;
  friend bool operator==(const SdpaShape&, const SdpaShape&) = default;
};

struct SdpaShapeHash {
  size_t operator()(const SdpaShape& s) const {
    size_t seed = 0;
    for (int64_t v : {s.batch, s.seq_len, s.heads, s.kv_heads, s.head_dim}) {
      seed ^= std::hash<int64_t>{}(v) + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2);
    }
    return seed;
  }
};

// A cuDNN descriptor, destroyed with the object.
class CudnnDescriptor {
 public:
  CudnnDescriptor(const Cudnn* cudnn, cudnnBackendDescriptor_t descriptor)
      : cudnn_(cudnn), descriptor_(descriptor) {}
  CudnnDescriptor(CudnnDescriptor&& other) noexcept;
  CudnnDescriptor& operator=(CudnnDescriptor&&) = delete;
  CudnnDescriptor(const CudnnDescriptor&) = delete;
  ~CudnnDescriptor();
  cudnnBackendDescriptor_t get() const { return descriptor_; }

 private:
  const Cudnn* cudnn_;
  cudnnBackendDescriptor_t descriptor_;
};

enum class SdpaDirection { kForward, kBackward };

// A finalized execution plan of one graph and the workspace it asks for. The plan is kept with
// every descriptor it was built from.
struct SdpaPlan {
  SdpaDirection direction = SdpaDirection::kForward;
  SdpaShape shape;
  std::vector<CudnnDescriptor> descriptors;  // the graph's, the plan's among them
  cudnnBackendDescriptor_t plan = nullptr;
  int64_t workspace_bytes = 0;
  int64_t engine = -1;  // the engine configuration's index in the heuristic's list
};

// Builds and finalizes the plan of a direction's graph on the first engine configuration of
// cuDNN's heuristic (mode A) that finalizes:
//   forward:  out = softmax(scale q k^T, causal) v, stats = each row's log-sum-exp;
//   backward: dq, dk, dv of that from dout, out and stats (P recomputed, no dropout).
// The error names the step, the descriptor and the attribute that failed, with cuDNN's status
// and message; Unimplemented means no engine takes the graph.
absl::StatusOr<SdpaPlan> BuildSdpaPlan(const Cudnn& cudnn, cudnnHandle_t handle,
                                       SdpaDirection direction, const SdpaShape& shape);

// Builds and finalizes every tensor and operation descriptor of the graph, which needs no device
// (the operation graph and the plan do): the host test's check of the graph.
absl::Status BuildSdpaOperations(const Cudnn& cudnn, SdpaDirection direction,
                                 const SdpaShape& shape);

// Device pointers, 16-byte aligned; q, k, v, out and their gradients bf16, the rest f32.
struct SdpaForwardOperands {
  const void* q;
  const void* k;
  const void* v;
  void* out;
  float* stats;
  void* workspace;  // plan.workspace_bytes
};
struct SdpaBackwardOperands {
  const void* q;
  const void* k;
  const void* v;
  const void* out;
  const float* stats;
  const void* dout;
  void* dq;  // written, not accumulated (so are dk and dv)
  void* dk;
  void* dv;
  float* softmax_sum;     // [batch, heads, seq]: scratch of the graph's
  float* dq_accumulator;  // [batch, heads, seq, head_dim]: scratch, zeroed before the call
  void* workspace;        // plan.workspace_bytes
};

// Enqueue the plan on the handle's stream; the error names cuDNN's status and message.
absl::Status ExecuteSdpaForward(const Cudnn& cudnn, cudnnHandle_t handle, const SdpaPlan& plan,
                                const SdpaForwardOperands& operands);
absl::Status ExecuteSdpaBackward(const Cudnn& cudnn, cudnnHandle_t handle, const SdpaPlan& plan,
                                 const SdpaBackwardOperands& operands);

}  // namespace titan::cuda

#endif  // TITAN_PLUGINS_DEVICE_CUDA_CUDNN_SDPA_H_
