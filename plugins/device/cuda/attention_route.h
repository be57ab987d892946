// Which attention runs a call on the CUDA device: cuDNN's fused flash attention in bf16 or
// titan's tiled f32 kernels (attention_kernels.h). cuDNN runs only where it is certain to apply;
// everything else, and every shape cuDNN refuses when its plan is built, takes the tiled kernels.
// Plain arithmetic on the call's shape and the machine, so the host tests check every case.
#ifndef TITAN_PLUGINS_DEVICE_CUDA_ATTENTION_ROUTE_H_
#define TITAN_PLUGINS_DEVICE_CUDA_ATTENTION_ROUTE_H_

#include <cstdint>
#include <string>

#include "titan/status.h"

namespace titan::cuda {

// The cuda device's `job.attention` key.
enum class AttentionMode {
  kAuto,   // cuDNN where eligible in a bf16 run (AttentionSpec::matmul_dtype bf16), else tiled
  kCudnn,  // cuDNN where eligible, whatever the run's precision
  kTiled,  // titan's tiled f32 kernels always
};
absl::StatusOr<AttentionMode> ParseAttentionMode(const std::string& value);
const char* AttentionModeName(AttentionMode mode);

// What the choice depends on.
struct AttentionCase {
  AttentionMode mode = AttentionMode::kAuto;
  bool bf16_run = false;  // AttentionSpec::matmul_dtype is bf16 (mixed_precision_param)
  int capability = 0;     // the GPU's major * 10 + minor
  bool cudnn_loaded = false;
  bool backward = false;
  // The call (AttentionSpec's fields).
  int64_t seq_len = 0, kv_len = 0, head_dim = 0, q_offset = 0, kv_offset = 0;
};

struct AttentionRoute {
  bool cudnn = false;
  std::string reason;  // why the tiled kernels run; empty when cuDNN does
};

// The largest head dimension titan hands cuDNN: its flash attention takes up to 128 on every
// GPU from sm_80 (256 only on some, and not for every backward).
constexpr int64_t kCudnnMaxHeadDim = 128;

// The backward takes sequences of a multiple of this: cuDNN up to 9.15.0 computes others wrong
// without a padding mask (cuDNN frontend's workaround adds one), which titan does not build.
constexpr int64_t kCudnnBackwardSeqMultiple = 128;

AttentionRoute ChooseAttention(const AttentionCase& c);

}  // namespace titan::cuda

#endif  // TITAN_PLUGINS_DEVICE_CUDA_ATTENTION_ROUTE_H_
