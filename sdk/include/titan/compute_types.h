// The plain data the compute interface's kernels take besides their tensors: attention's and
// RoPE's shapes, a grouped GEMM's problems, the optimizers' hyperparameters, Float8 scaling,
// mixture-of-experts routing, and stream and event handles. Apart from titan/compute.h so that the
// operand checks (titan/compute_operands.h), which the interface runs, can name them.
#ifndef TITAN_COMPUTE_TYPES_H_
#define TITAN_COMPUTE_TYPES_H_

#include <cstdint>
#include <numbers>

#include "titan/tensor_view.h"

namespace titan {

// Causal attention over [batch, seq_len, heads, head_dim] queries and [batch, kv_len, kv_heads,
// head_dim] keys and values; query head h reads kv head h / (heads / kv_heads). Positions are
// global: query i sits at q_offset + i and key j at kv_offset + j, and a query sees the keys at
// or before its position (context parallelism hands each rank a chunk of a longer sequence).
struct AttentionSpec {
  int64_t batch = 0, seq_len = 0, kv_len = 0, heads = 0, kv_heads = 0, head_dim = 0;
  int64_t q_offset = 0, kv_offset = 0;
  // The precision of the run's matmuls (training.mixed_precision_param): under kBF16 a backend
  // may take attention's matmuls in bf16 too, as PyTorch's autocast does (each backend states
  // its tolerance); kF32 asks for f32 attention.
  DType matmul_dtype = DType::kF32;
};

// RoPE angles as Llama 3 computes them (TorchTitan's precompute_freqs_cis).
struct RopeSpec {
  int64_t head_dim = 0;
  double theta = 500000.0;
  bool scaled = true;  // Llama 3 scaling of the low frequencies
  double scale_factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0;
  double original_context = 8192.0;
};

// Llama 3's scaling of one RoPE frequency (TorchTitan's apply_scaling), for any config with
// RopeSpec's scaling fields, so that every backend builds the same tables.
template <typename Config>
float ScaledRopeFrequency(float freq, const Config& config) {
  const double low_wavelen = config.original_context / config.low_freq_factor;
  const double high_wavelen = config.original_context / config.high_freq_factor;
  const double wavelen = 2 * std::numbers::pi / freq;
  if (wavelen < high_wavelen) return freq;
  if (wavelen > low_wavelen) return static_cast<float>(freq / config.scale_factor);
  const double smooth = (config.original_context / wavelen - config.low_freq_factor) /
                        (config.high_freq_factor - config.low_freq_factor);
  return static_cast<float>((1 - smooth) * freq / config.scale_factor + smooth * freq);
}

// torch.optim's Adam (decoupled = false) and AdamW (decoupled = true) for one run of parameters.
struct AdamUpdate {
  double lr = 0, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0;
  bool decoupled_weight_decay = true;
  int64_t step = 1;  // 1 on the first update
};

// torch.optim.SGD for one run of parameters; `momentum_buffer` is unused when momentum is 0.
struct SgdUpdate {
  double lr = 0, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;
  int64_t step = 1;
};

// How Float8Quantize scales x [rows, columns]: one scale for the whole tensor, or one per row of
// what it writes; power_of_two rounds each scale down to a power of two (torchao's rowwise
// recipe). With transpose, out is x transposed ([columns, rows]), so that the per-row scales of
// out are per column of x: Float8Gemm takes both operands with the reduced dimension last.
// A scaling may be handed the amaxes to scale by (f32 on the device: [1] for the tensor, or one
// per row of out) instead of taking x's own, as Float8Amax computes them: ranks that each hold a
// piece of a tensor (fsdp's shards of a weight, tensor and context parallelism's pieces of a GEMM
// operand) max-reduce their pieces' amaxes and quantize by the whole's, so that each piece's
// codes and scales are those of the whole tensor's quantization.
enum class Float8Granularity : uint8_t { kTensor, kRow };
struct Float8Scaling {
  Float8Granularity granularity = Float8Granularity::kTensor;
  bool power_of_two = false;
  bool transpose = false;
  TensorView amax;  // data null: x's own amaxes
};

// How a mixture-of-experts router turns its logits into each token's experts and weights
// (TorchTitan's TokenChoiceTopKRouter; Qwen3: softmax, normalize; DeepSeek-V3: sigmoid, normalize,
// groups, scale).
struct MoeRouting {
  enum class Score : uint8_t { kSoftmax, kSigmoid };
  Score score = Score::kSoftmax;
  int64_t top_k = 1;
  bool normalize = true;      // weights divided by their sum (+ 1e-20)
  float scale = 1.0f;         // route scale, applied last
  int64_t groups = 1;         // node-limited routing: experts split into `groups` equal groups ...
  int64_t groups_chosen = 1;  // ... and only the best `groups_chosen` groups' experts are eligible
};

// One problem of a GroupedGemm: c = alpha * op(a) . op(b) + beta * c.
struct GemmGroup {
  TensorView a, b, c;
};

// An ordered queue of work on the device, and a marker in it. The CPU has one stream that runs
// everything at once, so its events are always complete.
using StreamHandle = void*;
using EventHandle = void*;

}  // namespace titan

#endif  // TITAN_COMPUTE_TYPES_H_
