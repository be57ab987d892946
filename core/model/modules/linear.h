// A linear layer y = x W^T over one parameter W [out_features, in_features]: in f32, with bf16
// operands under mixed precision, or in Float8 when the converter chose it. Under the
// zero-bubble split its backward leaves W's gradient for the weight pass.
#ifndef TITAN_CORE_MODEL_MODULES_LINEAR_H_
#define TITAN_CORE_MODEL_MODULES_LINEAR_H_

#include <functional>
#include <optional>

#include "core/model/modules/module_context.h"

namespace titan {

class Linear {
 public:
  Linear(ModuleContext& context, int weight) : ctx_(context), weight_(weight) {}

  int weight() const { return weight_; }
  // out [rows, out_features] (+)= in . W^T; `in` a matmul operand (ModuleContext::Operand).
  absl::Status Forward(const TensorView& in, const TensorView& out, bool accumulate = false);
  // Row-parallel W (tensor parallel splits its in_features): out [n_local, d] += this rank's
  // tokens of in . W^T summed over the tensor-parallel ranks (`in` holding every token).
  absl::Status AddRowParallel(const TensorView& in, const TensorView& out);
  // Over in's rows: dinp [rows, in_features] += dout . W (skipped when dinp has no data) and
  // grad(W) += dout^T . in (left for the weight pass while one is deferring); f32 dout, `in` as
  // the forward stored it (f32 or bf16).
  // With `scatter_dinp`, this is the last column-parallel layer summing into dinp (every token's
  // partial sums, which the norm before it reduce-scatters): under async tensor parallelism its
  // input gradient is computed by chunks inside the ring that reduce-scatters dinp, and the
  // norm's backward takes the result (ModuleContext::scattered_grad).
  absl::Status Backward(const TensorView& dout, const TensorView& in, const TensorView& dinp,
                        bool scatter_dinp = false);
  // The weight pass's part: grad(W) += dout^T . in, dout [rows, out_features] f32.
  absl::Status WeightGrad(const TensorView& dout, const TensorView& in);
  // As Backward, for a replicated W each tensor-parallel rank holds a part of dout for (a partial
  // sum): dinp gets this rank's part and grad(W) the parts summed over the ranks, through `sum`
  // (f32 scratch of W's size). Not for Float8 or the zero-bubble split.
  absl::Status BackwardOfPartialSums(const TensorView& dout, const TensorView& in,
                                     const TensorView& dinp, const TensorView& sum);

 private:
  bool float8() const { return ctx_.float8 != nullptr && ctx_.float8->Converts(weight_); }
  // W as a matmul operand: the low-precision copy a plugin gathered (Parameter::compute), else
  // its value as an Operand.
  absl::StatusOr<TensorView> WeightOperand();
  absl::StatusOr<Float8Operand> Float8WeightOperand();
  // Async tensor parallelism (titan/tensor_parallel_overlap.h). The gather a norm left, when it
  // is of `read`; else runs a pending gather whole first and returns none.
  absl::StatusOr<std::optional<PendingGather>> TakeGather(const TensorView& read);
  // This rank's rows of the gathered operand `read` before the ring runs: gather.local, or its
  // rounding to read's dtype written to its place in `read`. What a Float8 GEMM by chunks takes
  // a scale over all rows from (Float8Linears::BeginChunks).
  absl::StatusOr<TensorView> OwnRows(const PendingGather& gather, const TensorView& read);
  // A GEMM of the ring's chunks: W as compute.Gemm takes it, or (in Float8, where it begins the
  // chunks: Float8Linears::BeginChunks with a's scales from `a` over `rows`) none.
  absl::StatusOr<TensorView> BeginChunks(Float8Linears::ChunkedGemm which, const TensorView& a,
                                         bool gathered, int64_t rows);
  // c (+)= a_rows . W^T (kOutput) or a_rows . W (kGradInput), a_rows from row `first` on.
  absl::Status GemmChunk(Float8Linears::ChunkedGemm which, const TensorView& a_rows, int64_t first,
                         const TensorView& w, const TensorView& c, bool accumulate);
  // Runs `gather` by the tp plugin's ring, calling rows_arrived(first) for each rank's n_local
  // rows from row `first` on as they arrive, and records its times.
  absl::Status RunGather(const PendingGather& gather,
                         const std::function<absl::Status(int64_t first)>& rows_arrived);
  // Forward over the gather a norm left for `in`, each rank's rows multiplied as they arrive:
  // whether it ran (false: the caller computes as usual, any pending gather done whole).
  absl::StatusOr<bool> ForwardOverGather(const TensorView& in, const TensorView& out,
                                         bool accumulate);
  // As ForwardOverGather for the input gradient dinp += dout . W, dout the pending gather.
  absl::StatusOr<bool> InputGradOverGather(const TensorView& dout, const TensorView& g,
                                           const TensorView& dinp);
  // Backward's dinp += g . W and the reduce-scatter of dinp as one ring (scatter_dinp).
  absl::StatusOr<bool> InputGradReduceScatter(const TensorView& g, const TensorView& dinp);
  // AddRowParallel's matmul and reduce-scatter as one ring into `reduced` [n_local, out].
  absl::StatusOr<bool> ForwardReduceScatter(const TensorView& in, const TensorView& reduced);
  // Under tensor (and sequence) parallelism, the rows of each rank's chunk when x holds every
  // token (tp ranks x n_local rows), else 0. Where async tensor parallelism multiplies such an
  // operand chunk by chunk as it arrives (a column-parallel layer's forward, a row-parallel
  // one's input gradient), the synchronous path runs the same chunks' GEMMs, so both give every
  // row the same bits: a BLAS may round a row differently in a GEMM of another row count
  // (OpenBLAS's Haswell kernels do).
  int64_t GatheredChunkRows(const TensorView& x) const;
  // How tensor and context parallelism split W's Float8 operands now.
  Float8Split Split() const;
  // grad(W) += g^T . in, g the output gradient as a matmul operand.
  absl::Status AccumulateWeightGrad(const TensorView& g, const TensorView& in);

  ModuleContext& ctx_;
  int weight_;
};

}  // namespace titan

#endif  // TITAN_CORE_MODEL_MODULES_LINEAR_H_
