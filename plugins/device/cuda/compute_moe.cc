// The mixture-of-experts kernels of the CUDA compute (moe_kernels.cuh). The permutation waits for
// its kernels to report whether an expert id was out of range: the MoE layer reads the counts on
// the host right after it anyway, to size the experts' GEMMs and the all-to-all.
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "cuda_compute.h"
#include "cuda_status.h"
#include "moe_kernels.h"
#include "operands.h"

namespace titan::cuda {
namespace {

MoeRoutingArgs ArgsOf(const MoeRouting& r) {
  return {r.score == MoeRouting::Score::kSigmoid,
          r.top_k,
          r.normalize,
          r.scale,
          r.groups,
          r.groups_chosen};
}

}  // namespace

absl::Status CudaCompute::RunMoeRoute(const TensorView& logits, const TensorView& bias,
                                      const MoeRouting& routing, TensorView experts,
                                      TensorView weights) {
  const int64_t n = logits.shape[0], e = logits.shape[1];
  TITAN_RETURN_IF_ERROR(Ready());
  TITAN_ASSIGN_OR_RETURN(StreamScratch scores,
                         Scratch(MoeRouteScratchBytes(n, e, routing.groups), "MoeRoute scores"));
  return Check(LaunchMoeRoute(F(logits), bias.data != nullptr ? F(bias) : nullptr, ArgsOf(routing),
                              n, e, Data<int32_t>(experts), F(weights), scores.as<void>(), stream_),
               "MoeRoute kernel launch");
}

absl::Status CudaCompute::RunMoeRouteBackward(const TensorView& logits, const TensorView& experts,
                                              const TensorView& d_weights,
                                              const MoeRouting& routing, TensorView d_logits) {
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(LaunchMoeRouteBackward(F(logits), I(experts), F(d_weights), ArgsOf(routing),
                                      logits.shape[0], logits.shape[1], F(d_logits), stream_),
               "MoeRouteBackward kernel launch");
}

absl::Status CudaCompute::RunMoePermute(const TensorView& experts, TensorView counts,
                                        TensorView slots) {
  const int64_t m = experts.numel(), e = counts.numel();
  TITAN_RETURN_IF_ERROR(Ready());
  TITAN_ASSIGN_OR_RETURN(StreamScratch scratch,
                         Scratch(MoePermuteScratchBytes(m, e), "MoePermute tiles"));
  TITAN_RETURN_IF_ERROR(Check(LaunchMoePermute(I(experts), m, e, Data<int32_t>(counts),
                                               Data<int32_t>(slots), scratch.as<void>(), stream_),
                              "MoePermute kernel launch"));
  int64_t bad[2] = {-1, 0};
  TITAN_RETURN_IF_ERROR(
      Check(cudaMemcpyAsync(bad, scratch.as<void>(), sizeof(bad), cudaMemcpyDeviceToHost, stream_),
            "cudaMemcpyAsync (MoePermute)"));
  TITAN_RETURN_IF_ERROR(
      Check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (MoePermute)"));
  if (bad[0] < 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("MoePermute: operand 'experts' holds expert ",
                                                 bad[1], " at assignment ", bad[0],
                                                 ", outside [0, ", e, ")"));
}

absl::Status CudaCompute::RunMoeDispatch(const TensorView& x, const TensorView& slots,
                                         TensorView out) {
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(LaunchMoeDispatch(x.data, x.dtype == DType::kBF16, I(slots), out.data, x.shape[0],
                                 slots.numel(), x.shape[1], stream_),
               "MoeDispatch kernel launch");
}

absl::Status CudaCompute::RunMoeDispatchBackward(const TensorView& d_out, const TensorView& slots,
                                                 TensorView dx) {
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(LaunchMoeDispatchBackward(F(d_out), I(slots), F(dx), dx.shape[0], slots.numel(),
                                         dx.shape[1], stream_),
               "MoeDispatchBackward kernel launch");
}

absl::Status CudaCompute::RunMoeCombine(const TensorView& y, const TensorView& weights,
                                        const TensorView& slots, TensorView out) {
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(LaunchMoeCombine(F(y), F(weights), I(slots), F(out), out.shape[0], slots.numel(),
                                out.shape[1], stream_),
               "MoeCombine kernel launch");
}

absl::Status CudaCompute::RunMoeCombineBackward(const TensorView& d_out, const TensorView& y,
                                                const TensorView& weights, const TensorView& slots,
                                                TensorView d_y, TensorView d_weights) {
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(LaunchMoeCombineBackward(F(d_out), F(y), F(weights), I(slots), F(d_y), F(d_weights),
                                        d_out.shape[0], slots.numel(), d_out.shape[1], stream_),
               "MoeCombineBackward kernel launch");
}

}  // namespace titan::cuda
