// The compute interface: every kernel the model, the train step, the optimizers and the parallel
// plugins run, implemented once per device (the CPU device in the core, accelerators in device
// plugins). Operands are TensorViews on the compute's device; a kernel handed one on another
// device, or of a dtype it does not take, returns an error naming the kernel, the operand and
// what it expected. Work is issued in order on the current stream (the CPU runs it at once).
#ifndef TITAN_COMPUTE_H_
#define TITAN_COMPUTE_H_

#include <cstdint>
#include <numbers>
#include <span>
#include <string>

#include "titan/status.h"
#include "titan/tensor_view.h"

namespace titan {

// Causal attention over [batch, seq_len, heads, head_dim] queries and [batch, kv_len, kv_heads,
// head_dim] keys and values; query head h reads kv head h / (heads / kv_heads). Positions are
// global: query i sits at q_offset + i and key j at kv_offset + j, and a query sees the keys at
// or before its position (context parallelism hands each rank a chunk of a longer sequence).
struct AttentionSpec {
  int64_t batch = 0, seq_len = 0, kv_len = 0, heads = 0, kv_heads = 0, head_dim = 0;
  int64_t q_offset = 0, kv_offset = 0;
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

// An ordered queue of work on the device, and a marker in it. The CPU has one stream that runs
// everything at once, so its events are always complete.
using StreamHandle = void*;
using EventHandle = void*;

class Compute {
 public:
  virtual ~Compute() = default;

  virtual Device device() const = 0;
  // One line naming the implementation of each kernel family that may differ by machine
  // (the CPU's bf16 GEMM: oneDNN on AVX512_BF16/AMX or an exact emulation), for the log.
  virtual std::string Describe() const = 0;

  // --- Linear algebra --------------------------------------------------------------------
  // Row-major c[m, n] = alpha * op(a) . op(b) + beta * c, op(x) being x or its transpose; a and
  // b both f32 or both bf16, c f32; products accumulate in f32.
  virtual absl::Status Gemm(const TensorView& a, bool transpose_a, const TensorView& b,
                            bool transpose_b, float alpha, float beta, TensorView c) = 0;

  // Float8 (OCP e4m3fn or e5m2) operands a [m, k] and b [n, k], both with the reduced dimension
  // last (cuBLASLt's FP8 layout), each with f32 inverse scales ([1] for the tensor, or one per
  // row: [m] for a, [n] for b): c[m, n] = alpha * (a . b^T) * inv_a[i] * inv_b[j] + beta * c,
  // the products of the decoded codes accumulated in f32 and the scales applied to the sums (as
  // torch._scaled_mm). c is f32.
  virtual absl::Status Float8Gemm(const TensorView& a, const TensorView& inverse_scale_a,
                                  const TensorView& b, const TensorView& inverse_scale_b,
                                  float alpha, float beta, TensorView c) = 0;
  // x [rows, columns] (f32 or bf16) into out (f8e4m3 or f8e5m2, [rows, columns], or [columns,
  // rows] with scaling.transpose) as torchao scales: amax = the largest |x| over the tensor or
  // the row of out, floored at 1e-12; scale = the format's largest finite / amax in f32 (rounded
  // down to a power of two if asked); out = x * scale, saturated to the largest finite and
  // rounded to nearest even; inverse_scales (f32, [1] or one per row of out) = 1 / scale.
  virtual absl::Status Float8Quantize(const TensorView& x, const Float8Scaling& scaling,
                                      TensorView out, TensorView inverse_scales) = 0;
  // amax (f32, [1] or one per row of out) = the amaxes Float8Quantize scales x by under
  // `scaling` (whose own amax is ignored): the largest |x| over the tensor or each row of out, not
  // floored, NaN where a NaN is.
  virtual absl::Status Float8Amax(const TensorView& x, const Float8Scaling& scaling,
                                  TensorView amax) = 0;

  // --- The model's layers (f32 activations) -----------------------------------------------
  // out [b, t, heads, hd]; lse [b, heads, t] saves each softmax row's log-sum-exp; a query that
  // sees no key gets zeros and an lse of -inf.
  virtual absl::Status AttentionForward(const AttentionSpec& spec, const TensorView& q,
                                        const TensorView& k, const TensorView& v, TensorView out,
                                        TensorView lse) = 0;
  // dq, dk and dv accumulate.
  virtual absl::Status AttentionBackward(const AttentionSpec& spec, const TensorView& dout,
                                         const TensorView& q, const TensorView& k,
                                         const TensorView& v, const TensorView& out,
                                         const TensorView& lse, TensorView dq, TensorView dk,
                                         TensorView dv) = 0;
  // Folds a partial attention result (part_out, part_lse: the same queries over other keys, as
  // AttentionForward writes them) into out and lse, which become the attention over both sets
  // of keys: lse' = log(exp(lse) + exp(part_lse)), out' = out exp(lse - lse') + part_out
  // exp(part_lse - lse'). A side whose lse is -inf (no key seen) contributes nothing. Context
  // parallelism's ring merges the chunks of keys it is passed this way.
  virtual absl::Status AttentionMerge(const AttentionSpec& spec, const TensorView& part_out,
                                      const TensorView& part_lse, TensorView out,
                                      TensorView lse) = 0;
  // Rows of inp [n, c]: out = inp / rms(inp) * weight; saves rstd [n].
  virtual absl::Status RmsNormForward(const TensorView& inp, const TensorView& weight, double eps,
                                      TensorView out, TensorView rstd) = 0;
  // dinp and dweight accumulate.
  virtual absl::Status RmsNormBackward(const TensorView& dout, const TensorView& inp,
                                       const TensorView& weight, const TensorView& rstd,
                                       TensorView dinp, TensorView dweight) = 0;
  // cos, sin [seq_len, head_dim / 2] for the positions position_offset .. + seq_len - 1.
  virtual absl::Status RopeTable(const RopeSpec& spec, int64_t position_offset, TensorView cos,
                                 TensorView sin) = 0;
  // In place on x [b, t, heads, head_dim]; the backward rotates a gradient back.
  virtual absl::Status RopeForward(const TensorView& cos, const TensorView& sin, TensorView x) = 0;
  virtual absl::Status RopeBackward(const TensorView& cos, const TensorView& sin,
                                    TensorView dx) = 0;
  // out = silu(a) * b; da and db accumulate.
  virtual absl::Status SwiGluForward(const TensorView& a, const TensorView& b, TensorView out) = 0;
  virtual absl::Status SwiGluBackward(const TensorView& dout, const TensorView& a,
                                      const TensorView& b, TensorView da, TensorView db) = 0;
  // The table holds the vocabulary rows [first_row, first_row + rows) (all of them on one
  // tensor-parallel rank); tokens (i32) outside it look up zeros and add no gradient.
  virtual absl::Status EmbeddingForward(const TensorView& tokens, const TensorView& table,
                                        int64_t first_row, TensorView out) = 0;
  virtual absl::Status EmbeddingBackward(const TensorView& tokens, const TensorView& dout,
                                         int64_t first_row, TensorView dtable) = 0;

  // --- Cross-entropy in pieces, so logits split by vocabulary never meet -----------------------
  // logits [n, v] hold the columns [first_column, first_column + v); targets i32 [n] (-100 is
  // ignored). Between the pieces the caller reduces max (max), sum and target (sum) over ranks.
  virtual absl::Status CrossEntropyRowMax(const TensorView& logits, TensorView max) = 0;
  virtual absl::Status CrossEntropySumExp(const TensorView& logits, const TensorView& max,
                                          TensorView sum) = 0;
  virtual absl::Status CrossEntropyTargetLogit(const TensorView& logits, const TensorView& targets,
                                               int64_t first_column, TensorView target) = 0;
  // sum becomes the log-sum-exp in place; loss [1] on the device gets the mean over counted rows.
  virtual absl::Status CrossEntropyFinish(const TensorView& max, const TensorView& target,
                                          const TensorView& targets, TensorView sum_to_lse,
                                          TensorView loss) = 0;
  // dlogits = dloss * (softmax - onehot) / counted rows; may alias logits.
  virtual absl::Status CrossEntropyBackward(const TensorView& logits, const TensorView& lse,
                                            const TensorView& targets, int64_t first_column,
                                            float dloss, TensorView dlogits) = 0;

  // --- Optimizer updates, in place on f32 runs of equal length -----------------------------
  virtual absl::Status AdamStep(const AdamUpdate& update, TensorView params,
                                const TensorView& grads, TensorView exp_avg,
                                TensorView exp_avg_sq) = 0;
  virtual absl::Status SgdStep(const SgdUpdate& update, TensorView params, const TensorView& grads,
                               TensorView momentum_buffer) = 0;

  // --- Reductions, casts and elementwise ---------------------------------------------------
  // out (f32 [2]) = the sum over i of weights[i] * (sum of squares of tensors[i]), accumulated
  // in f64 and stored as two f32s (the high part and the remainder) so that ranks can all-reduce
  // it in f32. A non-finite value anywhere makes the sum non-finite.
  virtual absl::Status SumOfSquares(std::span<const TensorView> tensors,
                                    std::span<const double> weights, TensorView out) = 0;
  // out[i] (f32, one per tensor) = the largest |x| of tensors[i] (f32 or bf16), 0 for an empty
  // one, NaN if it holds a NaN: the amaxes of Float8 scaling, many tensors in one pass.
  virtual absl::Status AbsMax(std::span<const TensorView> tensors, TensorView out) = 0;
  // dst = src converted (f32, bf16, f16; round to nearest even), same element count.
  virtual absl::Status Cast(const TensorView& src, TensorView dst) = 0;
  virtual absl::Status Fill(TensorView x, float value) = 0;
  virtual absl::Status Scale(TensorView x, float scale) = 0;
  // out += x.
  virtual absl::Status Accumulate(const TensorView& x, TensorView out) = 0;
  // dst = src, same dtype and size.
  virtual absl::Status Copy(const TensorView& src, TensorView dst) = 0;
  // dst [columns, rows] = src [rows, columns] transposed; both contiguous, of one dtype of any
  // element size (f32, bf16, float8 codes).
  virtual absl::Status Transpose(const TensorView& src, TensorView dst) = 0;
  // Host bytes, only through an explicit copy.
  virtual absl::Status CopyToHost(const TensorView& src, void* host_dst) = 0;
  virtual absl::Status CopyFromHost(const void* host_src, TensorView dst) = 0;

  // --- Streams and events ------------------------------------------------------------------
  virtual StreamHandle current_stream() const = 0;
  virtual absl::StatusOr<EventHandle> RecordEvent(StreamHandle stream) = 0;
  // Later work on `stream` starts after the event; the host is not blocked.
  virtual absl::Status StreamWaitEvent(StreamHandle stream, EventHandle event) = 0;
  // Blocks the host until the event is complete, then releases it.
  virtual absl::Status SynchronizeEvent(EventHandle event) = 0;
  virtual absl::Status Synchronize() = 0;
};

}  // namespace titan

#endif  // TITAN_COMPUTE_H_
