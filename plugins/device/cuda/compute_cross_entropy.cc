// Cross-entropy pieces of the CUDA compute; the loss stays on the device.
#include "cross_entropy_kernels.h"
#include "cuda_compute.h"
#include "cuda_status.h"
#include "operands.h"

namespace titan::cuda {
namespace {

absl::Status CheckLogits(const char* kernel, const TensorView& logits) {
  TITAN_RETURN_IF_ERROR(ExpectRank(kernel, "logits", logits, 2));
  return Expect(kernel, "logits", logits, DType::kF32);
}

}  // namespace

absl::Status CudaCompute::CrossEntropyRowMax(const TensorView& logits, TensorView max) {
  TITAN_RETURN_IF_ERROR(CheckLogits("CrossEntropyRowMax", logits));
  TITAN_RETURN_IF_ERROR(Expect("CrossEntropyRowMax", "max", max, DType::kF32, logits.shape[0]));
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(
      LaunchCrossEntropyRowMax(F(max), F(logits), logits.shape[0], logits.shape[1], stream_),
      "CrossEntropyRowMax kernel launch");
}

absl::Status CudaCompute::CrossEntropySumExp(const TensorView& logits, const TensorView& max,
                                             TensorView sum) {
  TITAN_RETURN_IF_ERROR(CheckLogits("CrossEntropySumExp", logits));
  const int64_t n = logits.shape[0];
  TITAN_RETURN_IF_ERROR(Expect("CrossEntropySumExp", "max", max, DType::kF32, n));
  TITAN_RETURN_IF_ERROR(Expect("CrossEntropySumExp", "sum", sum, DType::kF32, n));
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(LaunchCrossEntropySumExp(F(sum), F(logits), F(max), n, logits.shape[1], stream_),
               "CrossEntropySumExp kernel launch");
}

absl::Status CudaCompute::CrossEntropyTargetLogit(const TensorView& logits,
                                                  const TensorView& targets, int64_t first_column,
                                                  TensorView target) {
  constexpr const char* kKernel = "CrossEntropyTargetLogit";
  TITAN_RETURN_IF_ERROR(CheckLogits(kKernel, logits));
  const int64_t n = logits.shape[0];
  TITAN_RETURN_IF_ERROR(Expect(kKernel, "targets", targets, DType::kI32, n));
  TITAN_RETURN_IF_ERROR(Expect(kKernel, "target", target, DType::kF32, n));
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(LaunchCrossEntropyTargetLogit(F(target), F(logits), I(targets), n, logits.shape[1],
                                             first_column, stream_),
               "CrossEntropyTargetLogit kernel launch");
}

absl::Status CudaCompute::CrossEntropyFinish(const TensorView& max, const TensorView& target,
                                             const TensorView& targets, TensorView sum_to_lse,
                                             TensorView loss) {
  constexpr const char* kKernel = "CrossEntropyFinish";
  const int64_t n = targets.numel();
  TITAN_RETURN_IF_ERROR(Expect(kKernel, "targets", targets, DType::kI32));
  const std::pair<const char*, const TensorView*> rows[] = {
      {"max", &max}, {"target", &target}, {"sum_to_lse", &sum_to_lse}};
  for (const auto& [name, x] : rows)
    TITAN_RETURN_IF_ERROR(Expect(kKernel, name, *x, DType::kF32, n));
  TITAN_RETURN_IF_ERROR(Expect(kKernel, "loss", loss, DType::kF32, 1));
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(
      LaunchCrossEntropyFinish(F(sum_to_lse), F(max), F(target), I(targets), n, F(loss), stream_),
      "CrossEntropyFinish kernel launch");
}

absl::Status CudaCompute::CrossEntropyBackward(const TensorView& logits, const TensorView& lse,
                                               const TensorView& targets, int64_t first_column,
                                               float dloss, TensorView dlogits) {
  constexpr const char* kKernel = "CrossEntropyBackward";
  TITAN_RETURN_IF_ERROR(CheckLogits(kKernel, logits));
  const int64_t n = logits.shape[0];
  TITAN_RETURN_IF_ERROR(Expect(kKernel, "lse", lse, DType::kF32, n));
  TITAN_RETURN_IF_ERROR(Expect(kKernel, "targets", targets, DType::kI32, n));
  TITAN_RETURN_IF_ERROR(Expect(kKernel, "dlogits", dlogits, DType::kF32, logits.numel()));
  TITAN_RETURN_IF_ERROR(Ready());
  TITAN_ASSIGN_OR_RETURN(StreamScratch count,
                         Scratch(sizeof(int64_t), "CrossEntropyBackward row count"));
  return Check(
      LaunchCrossEntropyBackward(F(dlogits), F(logits), F(lse), I(targets), n, logits.shape[1],
                                 dloss, first_column, count.as<int64_t>(), stream_),
      "CrossEntropyBackward kernel launch");
}

}  // namespace titan::cuda
