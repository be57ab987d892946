// What every module of a decoder model computes with: the compute and its precision, the
// parameters, the tensor-parallel group, the attention in use, the current microbatch's tokens
// and the scratch all modules use in turn. The model owns it and plans it per (batch, seq_len);
// the modules (core/model/modules/) read it and pass each other TensorViews.
#ifndef TITAN_CORE_MODEL_MODULES_MODULE_CONTEXT_H_
#define TITAN_CORE_MODEL_MODULES_MODULE_CONTEXT_H_

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/model/config.h"
#include "core/model/float8_linear.h"
#include "core/model/tensor_parallel.h"
#include "titan/attention.h"
#include "titan/compute.h"
#include "titan/device.h"
#include "titan/module.h"

namespace titan {

class WeightPass;  // core/model/modules/weight_pass.h

// The sizes one tensor-parallel rank computes with: all of them on one rank.
struct LocalSizes {
  int64_t heads, kv_heads, hidden, vocab, first_vocab;
  // A mixture of experts': each routed expert's hidden features, all shared experts' together.
  int64_t expert_hidden, shared_hidden;
};

// The bf16 scratch a matmul operand is rounded into under mixed precision: the input (the
// attention's output; the other inputs are stored in bf16), the output's gradient, the weight.
enum class OperandScratch { kInput, kGrad, kWeight };
inline constexpr int kOperandScratches = 3;

// Scratch every block of every microbatch uses in turn, planned once per (batch, seq_len): n is
// every token of the batch (as the column-parallel projections see them), n_local this rank's.
struct SharedScratch {
  TensorView rope_cos, rope_sin;  // [seq_len, head_dim / 2]
  // Gradients in flight: the residual stream's [n_local, d]; a norm output's [n, d]; the
  // attention's output, queries, keys and values [n, heads or kv_heads * head_dim]; SwiGLU's
  // output and inputs [n, hidden].
  TensorView d_residual, d_norm_out, d_att, d_q, d_k, d_v, d_h, d_a, d_b;
  // A mixture of experts' (empty without): for its m assignments, the gradients of the experts'
  // outputs [m, d], hidden features [m, expert hidden], gate and up projections, and inputs
  // [m, d]; of the router's logits [n, experts] and the weights [n, top_k].
  TensorView moe_d_y, moe_d_h, moe_d_a, moe_d_b, moe_d_x, moe_d_logits, moe_d_weights;
  // Under expert parallelism the hidden ones hold M rows (RoutedActs), and these the gradients
  // of the received rows' outputs and inputs [M, d].
  TensorView moe_recv_d_y, moe_recv_d_x;
  // Under tensor parallelism: the router's gradient, summed over the ranks [experts, d].
  TensorView moe_router_grad;
  // With the sequence-wise auxiliary loss: its gradient of the router's logits [n, experts].
  TensorView moe_aux_d_logits;
  // Latent attention's (empty without): three buffers of n x its widest per-token row, through
  // which it splits, joins and pads per-head columns by transposes; and [heads] of ones to
  // broadcast the shared rotary key to every head (and sum its gradient back).
  TensorView latent_a, latent_b, latent_c, latent_ones;
  // Tensor parallel only (empty on one rank): this rank's tokens [n_local, d], every token
  // [n, d], a norm weight's gradient [d, or head_dim when larger].
  TensorView tokens_local, tokens_full, norm_grad;
  std::array<TensorView, kOperandScratches> bf16;  // empty in f32
};

// Async tensor parallelism: a gather of every rank's tokens that a norm left to the linear layer
// reading `out` next, which runs it by chunks under its matmul (Linear); `full` is f32, `out` the
// same memory or its rounding to the matmul dtype.
struct PendingGather {
  TensorView local, full, out;
};

// Async tensor parallelism: the reduce-scatter of a norm's output gradient `full` (every token's
// partial sums) that the last column-parallel linear ran by the ring, `local` the result.
struct ScatteredGrad {
  const void* full;
  TensorView local;
};

struct ModuleContext {
  ModuleContext(const LlamaConfig& config, Compute& compute, DevicePlugin* device,
                DType matmul_dtype, CausalAttention& attention)
      : config(config),
        compute(compute),
        device(device),
        matmul_dtype(matmul_dtype),
        attention(&attention) {}

  const LlamaConfig& config;
  Compute& compute;
  DevicePlugin* device;  // allocates the model's memory; null: host memory
  // kF32, or kBF16: matmul operands rounded to bf16, products accumulated in f32.
  DType matmul_dtype;
  CausalAttention* attention;  // the model's own local attention or a plugin's
  std::vector<Parameter> parameters;
  TensorParallelGroup tp;
  // The expert-parallel ranks; null: every routed expert on this rank (ExpertParallelLayout).
  Communicator* ep = nullptr;
  Float8Linears* float8 = nullptr;  // null: no linear layer in Float8
  std::vector<bool> row_parallel;   // per parameter: tp splits its in_features (kRowwise)

  // The planned sizes: the batch, this rank's tokens of each sequence, every token of the
  // batch, this rank's tokens between blocks (n / the tensor-parallel degree).
  int64_t batch = 0, seq_len = 0, n = 0, n_local = 0;
  SharedScratch scratch;
  TensorView token_ids, target_ids;  // the current microbatch's, i32 [n] on the device
  // Set while a zero-bubble BackwardInput runs: weight gradients are kept for its weight pass.
  WeightPass* deferring = nullptr;
  std::optional<PendingGather> pending_gather;  // async tensor parallelism only
  std::optional<ScatteredGrad> scattered_grad;  // likewise
  // Async tensor parallelism's communication per layer since DecoderModel took it.
  std::vector<OverlapTime> overlap_times;

  LocalSizes local() const;
  int ep_size() const { return ep != nullptr ? ep->size() : 1; }
  // The rows a rank's routed experts may compute at most: its m = n x top_k assignments, or
  // under expert parallelism every ep rank's.
  int64_t expert_rows() const { return n * config.moe.top_k * ep_size(); }
  // An f32 view of model memory on the compute's device.
  TensorView F32(void* data, std::vector<int64_t> shape) const {
    return TensorView{data, DType::kF32, compute.device(), std::move(shape), {}};
  }
  // The first elements of `view`'s memory, as `shape` (of at most as many elements).
  static TensorView Reshaped(const TensorView& view, std::vector<int64_t> shape);
  // Rows [first, first + count) of `matrix` (contiguous, its first dimension the rows).
  static TensorView Rows(const TensorView& matrix, int64_t first, int64_t count);
  // Leaves the gather of `local` into `full` (and its rounding into `out`) for the next linear
  // layer reading `out` under async tensor parallelism; runs it now without.
  absl::Status GatherTokens(const TensorView& local, const TensorView& full, const TensorView& out);
  // Runs the gather a norm left, if no linear layer took it.
  absl::Status FinishGather();
  // After a ring that began at `start_us` (NowMicros): adds the ring's times to overlap_times and,
  // in a profiled step, a span per layer holding them to the trace.
  void RecordOverlap(int64_t start_us);
  // A matmul operand in the compute precision: x itself when it has that dtype, else (f32 under
  // mixed precision) its bf16 rounding in `scratch`.
  absl::StatusOr<TensorView> Operand(const TensorView& x, OperandScratch scratch) const;
  absl::Status Zero(const TensorView& x) const { return compute.Fill(x, 0.0f); }
  // A parameter's value or gradient as the module computes with it: f32 on the compute's device.
  TensorView Value(int weight) const;
  // A weight as a matmul operand: the low-precision copy a plugin gathered (Parameter::compute),
  // else its value as an Operand (in the kWeight scratch).
  absl::StatusOr<TensorView> WeightOperand(int weight) const;
  TensorView Grad(int weight) const;
};

}  // namespace titan

#endif  // TITAN_CORE_MODEL_MODULES_MODULE_CONTEXT_H_
