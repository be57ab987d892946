// Cross-entropy pieces of the CUDA compute; the loss stays on the device.
#include "cross_entropy_kernels.h"
#include "cuda_compute.h"
#include "cuda_status.h"
#include "operands.h"

namespace titan::cuda {
absl::Status CudaCompute::RunCrossEntropyRowMax(const TensorView& logits, TensorView max) {
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(
      LaunchCrossEntropyRowMax(F(max), In(logits), logits.shape[0], logits.shape[1], stream_),
      "CrossEntropyRowMax kernel launch");
}

absl::Status CudaCompute::RunCrossEntropySumExp(const TensorView& logits, const TensorView& max,
                                                TensorView sum) {
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(LaunchCrossEntropySumExp(F(sum), In(logits), F(max), logits.shape[0],
                                        logits.shape[1], stream_),
               "CrossEntropySumExp kernel launch");
}

absl::Status CudaCompute::RunCrossEntropyTargetLogit(const TensorView& logits,
                                                     const TensorView& targets,
                                                     int64_t first_column, TensorView target) {
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(LaunchCrossEntropyTargetLogit(F(target), In(logits), I(targets), logits.shape[0],
                                             logits.shape[1], first_column, stream_),
               "CrossEntropyTargetLogit kernel launch");
}

absl::Status CudaCompute::RunCrossEntropyFinish(const TensorView& max, const TensorView& target,
                                                const TensorView& targets, TensorView sum_to_lse,
                                                TensorView loss) {
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(LaunchCrossEntropyFinish(F(sum_to_lse), F(max), F(target), I(targets),
                                        targets.numel(), F(loss), stream_),
               "CrossEntropyFinish kernel launch");
}

absl::Status CudaCompute::RunCrossEntropyBackward(const TensorView& logits, const TensorView& lse,
                                                  const TensorView& targets, int64_t first_column,
                                                  float dloss, TensorView dlogits) {
  const int64_t n = logits.shape[0];
  TITAN_RETURN_IF_ERROR(Ready());
  TITAN_ASSIGN_OR_RETURN(StreamScratch count,
                         Scratch(sizeof(int64_t), "CrossEntropyBackward row count"));
  return Check(
      LaunchCrossEntropyBackward(Out(dlogits), In(logits), F(lse), I(targets), n, logits.shape[1],
                                 dloss, first_column, count.as<int64_t>(), stream_),
      "CrossEntropyBackward kernel launch");
}

}  // namespace titan::cuda
