// The model's layer kernels of the CUDA compute: RMSNorm, RoPE, SwiGLU and embedding.
#include <cmath>
#include <vector>

#include "cuda_compute.h"
#include "cuda_status.h"
#include "layer_kernels.h"
#include "operands.h"

namespace titan::cuda {

absl::Status CudaCompute::RunRmsNormForward(const TensorView& inp, const TensorView& weight,
                                            double eps, TensorView out, TensorView rstd) {
  const int64_t n = inp.shape[0], c = inp.shape[1];
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(LaunchRmsNormForward(Out(out), F(rstd), In(inp), F(weight), n, c, eps, stream_),
               "RmsNormForward kernel launch");
}

absl::Status CudaCompute::RunRmsNormBackward(const TensorView& dout, const TensorView& inp,
                                             const TensorView& weight, const TensorView& rstd,
                                             TensorView dinp, TensorView dweight) {
  const int64_t n = inp.shape[0], c = inp.shape[1];
  TITAN_RETURN_IF_ERROR(Ready());
  TITAN_ASSIGN_OR_RETURN(
      StreamScratch partials,
      Scratch(static_cast<size_t>(kRmsNormChunks * c) * sizeof(float), "RmsNormBackward partials"));
  return Check(LaunchRmsNormBackward(Out(dinp), F(dweight), In(dout), In(inp), F(weight), F(rstd),
                                     n, c, partials.as<float>(), stream_),
               "RmsNormBackward kernel launch");
}

absl::Status CudaCompute::RunRopeTable(const RopeSpec& spec, int64_t position_offset,
                                       TensorView cos, TensorView sin) {
  TITAN_RETURN_IF_ERROR(Ready());
  const int64_t half = spec.head_dim / 2;
  std::vector<float> freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(spec.head_dim);
    freq[i] = 1.0f / static_cast<float>(std::pow(static_cast<float>(spec.theta), exponent));
    if (spec.scaled) freq[i] = ScaledRopeFrequency(freq[i], spec);
  }
  TITAN_ASSIGN_OR_RETURN(StreamScratch device_freq,
                         Scratch(freq.size() * sizeof(float), "RopeTable frequencies"));
  TITAN_RETURN_IF_ERROR(
      Check(cudaMemcpyAsync(device_freq.as<float>(), freq.data(), freq.size() * sizeof(float),
                            cudaMemcpyHostToDevice, stream_),
            "cudaMemcpyAsync (RopeTable)"));
  TITAN_RETURN_IF_ERROR(Check(LaunchRopeTable(F(cos), F(sin), device_freq.as<float>(), cos.shape[0],
                                              half, position_offset, stream_),
                              "RopeTable kernel launch"));
  // `freq` is host memory the copy reads; it must outlive the copy.
  return Check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (RopeTable)");
}

absl::Status CudaCompute::RunRopeForward(const TensorView& cos, const TensorView& sin,
                                         TensorView x) {
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(LaunchRope(Out(x), F(cos), F(sin), x.shape[0], x.shape[1], x.shape[2], x.shape[3],
                          1.0f, stream_),
               "RopeForward kernel launch");
}

absl::Status CudaCompute::RunRopeBackward(const TensorView& cos, const TensorView& sin,
                                          TensorView dx) {
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(LaunchRope(Out(dx), F(cos), F(sin), dx.shape[0], dx.shape[1], dx.shape[2],
                          dx.shape[3], -1.0f, stream_),
               "RopeBackward kernel launch");
}

absl::Status CudaCompute::RunSwiGluForward(const TensorView& a, const TensorView& b,
                                           TensorView out) {
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(LaunchSwiGluForward(Out(out), In(a), In(b), a.numel(), stream_),
               "SwiGluForward kernel launch");
}

absl::Status CudaCompute::RunSwiGluBackward(const TensorView& dout, const TensorView& a,
                                            const TensorView& b, TensorView da, TensorView db) {
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(LaunchSwiGluBackward(Out(da), Out(db), In(dout), In(a), In(b), a.numel(), stream_),
               "SwiGluBackward kernel launch");
}

absl::Status CudaCompute::RunEmbeddingForward(const TensorView& tokens, const TensorView& table,
                                              int64_t first_row, TensorView out) {
  const int64_t n = tokens.numel(), c = table.shape[1];
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(LaunchEmbeddingForward(Out(out), I(tokens), F(table), n, c, first_row,
                                      table.shape[0], stream_),
               "EmbeddingForward kernel launch");
}

absl::Status CudaCompute::RunEmbeddingBackward(const TensorView& tokens, const TensorView& dout,
                                               int64_t first_row, TensorView dtable) {
  const int64_t n = tokens.numel(), c = dtable.shape[1];
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(LaunchEmbeddingBackward(F(dtable), In(dout), I(tokens), n, c, first_row,
                                       dtable.shape[0], stream_),
               "EmbeddingBackward kernel launch");
}

}  // namespace titan::cuda
