#include "core/model/modules/linear.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/model/modules/weight_pass.h"
#include "core/runtime/profiler.h"

namespace titan {

using ChunkedGemm = Float8Linears::ChunkedGemm;

absl::StatusOr<TensorView> Linear::WeightOperand() { return ctx_.WeightOperand(weight_); }

absl::StatusOr<Float8Operand> Linear::Float8WeightOperand() {
  const Parameter& p = ctx_.parameters[weight_];
  if (p.compute.data != nullptr && p.compute.dtype == DType::kF8E4M3) {
    return Float8Operand{{}, p.compute, p.compute_inverse_scale};
  }
  TITAN_ASSIGN_OR_RETURN(TensorView high, WeightOperand());
  return Float8Operand{high, {}, {}};
}

int64_t Linear::GatheredChunkRows(const TensorView& x) const {
  const int64_t ranks = ctx_.tp.size();
  if (ranks == 1 || x.shape.empty() || x.shape[0] != ctx_.n || ctx_.n != ranks * ctx_.n_local) {
    return 0;
  }
  return ctx_.n_local;
}

Float8Split Linear::Split() const {
  const bool row_parallel =
      weight_ < static_cast<int>(ctx_.row_parallel.size()) && ctx_.row_parallel[weight_];
  return {row_parallel, ctx_.tp.communicator(), ctx_.attention->sequence_group()};
}

absl::StatusOr<std::optional<PendingGather>> Linear::TakeGather(const TensorView& read) {
  if (!ctx_.pending_gather) return std::nullopt;
  if (ctx_.pending_gather->out.data != read.data) {
    TITAN_RETURN_IF_ERROR(ctx_.FinishGather());
    return std::nullopt;
  }
  return std::exchange(ctx_.pending_gather, std::nullopt);
}

absl::StatusOr<TensorView> Linear::OwnRows(const PendingGather& gather, const TensorView& read) {
  const int64_t rows = ctx_.n_local, first = ctx_.tp.rank() * rows;
  const TensorView local = ModuleContext::Reshaped(gather.local, {rows, read.shape[1]});
  if (read.dtype == local.dtype) return local;
  const TensorView own = ModuleContext::Rows(read, first, rows);
  TITAN_RETURN_IF_ERROR(ctx_.compute.Cast(local, own));
  return own;
}

absl::StatusOr<TensorView> Linear::BeginChunks(ChunkedGemm which, const TensorView& a,
                                               bool gathered, int64_t rows) {
  if (!float8()) return WeightOperand();
  TITAN_ASSIGN_OR_RETURN(Float8Operand w, Float8WeightOperand());
  TITAN_RETURN_IF_ERROR(ctx_.float8->BeginChunks(which, a, gathered, rows, w, Split()));
  return TensorView{};
}

absl::Status Linear::GemmChunk(ChunkedGemm which, const TensorView& a_rows, int64_t first,
                               const TensorView& w, const TensorView& c, bool accumulate) {
  if (float8()) return ctx_.float8->GemmChunk(a_rows, first, c, accumulate);
  return ctx_.compute.Gemm(a_rows, false, w, which == ChunkedGemm::kOutput, 1.0f,
                           accumulate ? 1.0f : 0.0f, c);
}

absl::Status Linear::RunGather(const PendingGather& gather,
                               const std::function<absl::Status(int64_t first)>& rows_arrived) {
  const int64_t start_us = NowMicros();
  TITAN_RETURN_IF_ERROR(ctx_.tp.overlap()->AllGatherMatmul(
      ctx_.parameters[weight_].name, gather.local, gather.full,
      [&](int chunk) { return rows_arrived(chunk * ctx_.n_local); }));
  ctx_.RecordOverlap(start_us);
  return absl::OkStatus();
}

absl::StatusOr<bool> Linear::ForwardOverGather(const TensorView& in, const TensorView& out,
                                               bool accumulate) {
  TITAN_ASSIGN_OR_RETURN(const std::optional<PendingGather> gather, TakeGather(in));
  if (!gather) return false;
  const TensorView full = ModuleContext::Reshaped(gather->full, gather->out.shape);
  const int64_t rows = ctx_.n_local;
  auto rounded = [&](int64_t first) -> absl::Status {
    if (gather->out.data == gather->full.data) return absl::OkStatus();
    return ctx_.compute.Cast(ModuleContext::Rows(full, first, rows),  // to bf16 as it arrives
                             ModuleContext::Rows(gather->out, first, rows));
  };
  TITAN_ASSIGN_OR_RETURN(const TensorView own, OwnRows(*gather, in));
  TITAN_ASSIGN_OR_RETURN(const TensorView w,
                         BeginChunks(ChunkedGemm::kOutput, own, /*gathered=*/true, in.shape[0]));
  TITAN_RETURN_IF_ERROR(RunGather(*gather, [&](int64_t first) -> absl::Status {
    TITAN_RETURN_IF_ERROR(rounded(first));
    return GemmChunk(ChunkedGemm::kOutput, ModuleContext::Rows(in, first, rows), first, w,
                     ModuleContext::Rows(out, first, rows), accumulate);
  }));
  return true;
}

absl::StatusOr<bool> Linear::InputGradOverGather(const TensorView& dout, const TensorView& g,
                                                 const TensorView& dinp) {
  if (dinp.data == nullptr) {
    TITAN_RETURN_IF_ERROR(ctx_.FinishGather());
    return false;
  }
  TITAN_ASSIGN_OR_RETURN(const std::optional<PendingGather> gather, TakeGather(dout));
  if (!gather) return false;
  TITAN_ASSIGN_OR_RETURN(const TensorView own, OwnRows({gather->local, gather->full, g}, g));
  TITAN_ASSIGN_OR_RETURN(const TensorView w,
                         BeginChunks(ChunkedGemm::kGradInput, own, /*gathered=*/true, g.shape[0]));
  const int64_t rows = ctx_.n_local;
  TITAN_RETURN_IF_ERROR(RunGather(*gather, [&](int64_t first) -> absl::Status {
    const TensorView g_rows = ModuleContext::Rows(g, first, rows);
    if (g.data != dout.data) {  // rounded to the matmul dtype as it arrives
      TITAN_RETURN_IF_ERROR(ctx_.compute.Cast(ModuleContext::Rows(dout, first, rows), g_rows));
    }
    return GemmChunk(ChunkedGemm::kGradInput, g_rows, first, w,
                     ModuleContext::Rows(dinp, first, rows), /*accumulate=*/true);
  }));
  return true;
}

absl::StatusOr<bool> Linear::InputGradReduceScatter(const TensorView& g, const TensorView& dinp) {
  if (ctx_.tp.overlap() == nullptr || dinp.data == nullptr) return false;
  TITAN_ASSIGN_OR_RETURN(const TensorView w,
                         BeginChunks(ChunkedGemm::kGradInput, g, /*gathered=*/false, g.shape[0]));
  const int64_t rows = ctx_.n_local, width = dinp.numel() / dinp.shape[0];
  const TensorView local = ModuleContext::Reshaped(ctx_.scratch.tokens_local, {rows * width});
  auto produce = [&](int chunk, const TensorView& partial) -> absl::Status {
    const int64_t first = chunk * rows;
    const TensorView sum = ModuleContext::Reshaped(partial, {rows, width});
    // The earlier layers' sums for these rows, then this layer's, as Backward adds them.
    TITAN_RETURN_IF_ERROR(ctx_.compute.Copy(ModuleContext::Rows(dinp, first, rows), sum));
    return GemmChunk(ChunkedGemm::kGradInput, ModuleContext::Rows(g, first, rows), first, w, sum,
                     /*accumulate=*/true);
  };
  const int64_t start_us = NowMicros();
  TITAN_RETURN_IF_ERROR(
      ctx_.tp.overlap()->MatmulReduceScatter(ctx_.parameters[weight_].name, produce, local));
  ctx_.RecordOverlap(start_us);
  ctx_.scattered_grad = ScatteredGrad{dinp.data, local};
  return true;
}

absl::StatusOr<bool> Linear::ForwardReduceScatter(const TensorView& in, const TensorView& reduced) {
  if (ctx_.tp.overlap() == nullptr) return false;
  TITAN_ASSIGN_OR_RETURN(const TensorView w,
                         BeginChunks(ChunkedGemm::kOutput, in, /*gathered=*/false, in.shape[0]));
  const int64_t rows = ctx_.n_local, out_features = reduced.shape[1];
  auto produce = [&](int chunk, const TensorView& partial) {
    return GemmChunk(ChunkedGemm::kOutput, ModuleContext::Rows(in, chunk * rows, rows),
                     chunk * rows, w, ModuleContext::Reshaped(partial, {rows, out_features}),
                     /*accumulate=*/false);
  };
  const int64_t start_us = NowMicros();
  TITAN_RETURN_IF_ERROR(ctx_.tp.overlap()->MatmulReduceScatter(
      ctx_.parameters[weight_].name, produce,
      ModuleContext::Reshaped(reduced, {rows * out_features})));
  ctx_.RecordOverlap(start_us);
  return true;
}

absl::Status Linear::Forward(const TensorView& in, const TensorView& out, bool accumulate) {
  TITAN_ASSIGN_OR_RETURN(const bool overlapped, ForwardOverGather(in, out, accumulate));
  if (overlapped) return absl::OkStatus();
  // The GEMMs ForwardOverGather runs, on the gathered rows at once (a Float8 scale over a whole
  // tensor max-reduced over tp as under the ring: every rank holds these rows, so it is theirs).
  if (const int64_t rows = Split().row_parallel ? 0 : GatheredChunkRows(in); rows > 0) {
    TITAN_ASSIGN_OR_RETURN(const TensorView w, BeginChunks(ChunkedGemm::kOutput, in,
                                                           /*gathered=*/true, in.shape[0]));
    for (int64_t first = 0; first < in.shape[0]; first += rows) {
      TITAN_RETURN_IF_ERROR(GemmChunk(ChunkedGemm::kOutput, ModuleContext::Rows(in, first, rows),
                                      first, w, ModuleContext::Rows(out, first, rows), accumulate));
    }
    return absl::OkStatus();
  }
  if (float8()) {
    TITAN_ASSIGN_OR_RETURN(Float8Operand w, Float8WeightOperand());
    return ctx_.float8->Forward(in, w, out, accumulate, Split());
  }
  TITAN_ASSIGN_OR_RETURN(TensorView w, WeightOperand());
  return ctx_.compute.Gemm(in, false, w, true, 1.0f, accumulate ? 1.0f : 0.0f, out);
}

absl::Status Linear::AddRowParallel(const TensorView& in, const TensorView& out) {
  const int64_t rows = in.shape[0], out_features = ctx_.parameters[weight_].value.shape[0];
  if (ctx_.tp.size() == 1) {
    return Forward(in, ModuleContext::Reshaped(out, {rows, out_features}), /*accumulate=*/true);
  }
  const int64_t local = ctx_.n_local * out_features;
  const TensorView reduced =
      ModuleContext::Reshaped(ctx_.scratch.tokens_local, {ctx_.n_local, out_features});
  TITAN_ASSIGN_OR_RETURN(const bool overlapped, ForwardReduceScatter(in, reduced));
  if (overlapped) {
    return ctx_.compute.Accumulate(ModuleContext::Reshaped(reduced, {local}),
                                   ModuleContext::Reshaped(out, {local}));
  }
  const TensorView full = ModuleContext::Reshaped(ctx_.scratch.tokens_full, {rows, out_features});
  TITAN_RETURN_IF_ERROR(Forward(in, full));
  TITAN_ASSIGN_OR_RETURN(
      const TensorView summed,
      ctx_.tp.ReduceScatterTokens(ModuleContext::Reshaped(full, {rows * out_features}),
                                  ModuleContext::Reshaped(reduced, {local})));
  return ctx_.compute.Accumulate(summed, ModuleContext::Reshaped(out, {local}));
}

absl::Status Linear::Backward(const TensorView& dout, const TensorView& in, const TensorView& dinp,
                              bool scatter_dinp) {
  TensorView g = dout;  // dout as a matmul operand, rounded by InputGradOverGather or here
  if (dout.dtype != ctx_.matmul_dtype) {
    g.dtype = ctx_.matmul_dtype;
    g.data = ctx_.scratch.bf16[static_cast<int>(OperandScratch::kGrad)].data;
  }
  TITAN_ASSIGN_OR_RETURN(const bool overlapped, InputGradOverGather(dout, g, dinp));
  if (!overlapped) {
    TITAN_ASSIGN_OR_RETURN(g, ctx_.Operand(dout, OperandScratch::kGrad));
  }
  bool scattered = false;
  if (scatter_dinp && !overlapped) {
    TITAN_ASSIGN_OR_RETURN(scattered, InputGradReduceScatter(g, dinp));
  }
  // A row-parallel layer's input gradient over the gathered dout: the GEMMs InputGradOverGather
  // runs, as in Forward.
  const int64_t chunk_rows = Split().row_parallel ? GatheredChunkRows(g) : 0;
  if (dinp.data != nullptr && !overlapped && !scattered && chunk_rows > 0) {
    TITAN_ASSIGN_OR_RETURN(const TensorView w, BeginChunks(ChunkedGemm::kGradInput, g,
                                                           /*gathered=*/true, g.shape[0]));
    for (int64_t first = 0; first < g.shape[0]; first += chunk_rows) {
      TITAN_RETURN_IF_ERROR(GemmChunk(ChunkedGemm::kGradInput,
                                      ModuleContext::Rows(g, first, chunk_rows), first, w,
                                      ModuleContext::Rows(dinp, first, chunk_rows),
                                      /*accumulate=*/true));
    }
  } else if (dinp.data != nullptr && !overlapped && !scattered) {
    if (float8()) {
      TITAN_ASSIGN_OR_RETURN(Float8Operand w, Float8WeightOperand());
      TITAN_RETURN_IF_ERROR(ctx_.float8->InputGrad(g, w, dinp, Split()));
    } else {
      TITAN_ASSIGN_OR_RETURN(TensorView w, WeightOperand());
      TITAN_RETURN_IF_ERROR(ctx_.compute.Gemm(g, false, w, false, 1.0f, 1.0f, dinp));
    }
  }
  if (ctx_.deferring != nullptr) {
    WeightPass& pass = *ctx_.deferring;
    TITAN_ASSIGN_OR_RETURN(TensorView saved, pass.Keep(dout, weight_, /*input=*/false));
    TITAN_ASSIGN_OR_RETURN(TensorView kept_in, pass.Keep(in, weight_, /*input=*/true));
    pass.Add(DeferredGrad::kProjection, weight_, in.shape[0], saved, kept_in);
    return absl::OkStatus();
  }
  return AccumulateWeightGrad(g, in);
}

absl::Status Linear::BackwardOfPartialSums(const TensorView& dout, const TensorView& in,
                                           const TensorView& dinp, const TensorView& sum) {
  if (ctx_.tp.size() == 1) return Backward(dout, in, dinp);
  if (float8() || ctx_.deferring != nullptr) {
    return absl::UnimplementedError(absl::StrCat(
        "model: ", ctx_.parameters[weight_].name,
        " sums its gradient over the tensor-parallel ranks, which Float8 and the zero-bubble "
        "split do not do"));
  }
  TITAN_ASSIGN_OR_RETURN(TensorView g, ctx_.Operand(dout, OperandScratch::kGrad));
  TITAN_ASSIGN_OR_RETURN(TensorView w, WeightOperand());
  TITAN_RETURN_IF_ERROR(ctx_.compute.Gemm(g, false, w, false, 1.0f, 1.0f, dinp));
  TITAN_ASSIGN_OR_RETURN(TensorView x, ctx_.Operand(in, OperandScratch::kInput));
  const TensorView dw = ctx_.Grad(weight_);
  const TensorView summed = ModuleContext::Reshaped(sum, dw.shape);
  TITAN_RETURN_IF_ERROR(ctx_.compute.Gemm(g, true, x, false, 1.0f, 0.0f, summed));
  TITAN_RETURN_IF_ERROR(ctx_.tp.AllReduceSum(summed));
  return ctx_.compute.Accumulate(summed, dw);
}

absl::Status Linear::WeightGrad(const TensorView& dout, const TensorView& in) {
  TITAN_ASSIGN_OR_RETURN(TensorView g, ctx_.Operand(dout, OperandScratch::kGrad));
  return AccumulateWeightGrad(g, in);
}

absl::Status Linear::AccumulateWeightGrad(const TensorView& g, const TensorView& in) {
  TITAN_ASSIGN_OR_RETURN(TensorView x, ctx_.Operand(in, OperandScratch::kInput));
  const TensorView dw = ctx_.Grad(weight_);
  if (float8()) return ctx_.float8->WeightGrad(g, x, dw, Split());
  return ctx_.compute.Gemm(g, true, x, false, 1.0f, 1.0f, dw);
}

}  // namespace titan
