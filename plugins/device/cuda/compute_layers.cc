// The model's layer kernels of the CUDA compute: RMSNorm, RoPE, SwiGLU and embedding.
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cuda_compute.h"
#include "cuda_status.h"
#include "layer_kernels.h"
#include "operands.h"

namespace titan::cuda {
namespace {

// x [b, t, heads, head_dim] against tables [t, head_dim / 2].
absl::Status CheckRope(const char* kernel, const TensorView& cos, const TensorView& sin,
                       const TensorView& x) {
  TITAN_RETURN_IF_ERROR(ExpectRank(kernel, "x", x, 4));
  TITAN_RETURN_IF_ERROR(Expect(kernel, "x", x, DType::kF32));
  const int64_t table = x.shape[1] * (x.shape[3] / 2);
  TITAN_RETURN_IF_ERROR(Expect(kernel, "cos", cos, DType::kF32, table));
  return Expect(kernel, "sin", sin, DType::kF32, table);
}

}  // namespace

absl::Status CudaCompute::RmsNormForward(const TensorView& inp, const TensorView& weight,
                                         double eps, TensorView out, TensorView rstd) {
  TITAN_RETURN_IF_ERROR(ExpectRank("RmsNormForward", "inp", inp, 2));
  const int64_t n = inp.shape[0], c = inp.shape[1];
  TITAN_RETURN_IF_ERROR(Expect("RmsNormForward", "inp", inp, DType::kF32));
  TITAN_RETURN_IF_ERROR(Expect("RmsNormForward", "weight", weight, DType::kF32, c));
  TITAN_RETURN_IF_ERROR(Expect("RmsNormForward", "out", out, DType::kF32, n * c));
  TITAN_RETURN_IF_ERROR(Expect("RmsNormForward", "rstd", rstd, DType::kF32, n));
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(LaunchRmsNormForward(F(out), F(rstd), F(inp), F(weight), n, c, eps, stream_),
               "RmsNormForward kernel launch");
}

absl::Status CudaCompute::RmsNormBackward(const TensorView& dout, const TensorView& inp,
                                          const TensorView& weight, const TensorView& rstd,
                                          TensorView dinp, TensorView dweight) {
  constexpr const char* kKernel = "RmsNormBackward";
  TITAN_RETURN_IF_ERROR(ExpectRank(kKernel, "inp", inp, 2));
  const int64_t n = inp.shape[0], c = inp.shape[1];
  TITAN_RETURN_IF_ERROR(Expect(kKernel, "inp", inp, DType::kF32));
  TITAN_RETURN_IF_ERROR(Expect(kKernel, "dout", dout, DType::kF32, n * c));
  TITAN_RETURN_IF_ERROR(Expect(kKernel, "dinp", dinp, DType::kF32, n * c));
  TITAN_RETURN_IF_ERROR(Expect(kKernel, "weight", weight, DType::kF32, c));
  TITAN_RETURN_IF_ERROR(Expect(kKernel, "dweight", dweight, DType::kF32, c));
  TITAN_RETURN_IF_ERROR(Expect(kKernel, "rstd", rstd, DType::kF32, n));
  TITAN_RETURN_IF_ERROR(Ready());
  TITAN_ASSIGN_OR_RETURN(
      StreamScratch partials,
      Scratch(static_cast<size_t>(kRmsNormChunks * c) * sizeof(float), "RmsNormBackward partials"));
  return Check(LaunchRmsNormBackward(F(dinp), F(dweight), F(dout), F(inp), F(weight), F(rstd), n, c,
                                     partials.as<float>(), stream_),
               "RmsNormBackward kernel launch");
}

absl::Status CudaCompute::RopeTable(const RopeSpec& spec, int64_t position_offset, TensorView cos,
                                    TensorView sin) {
  TITAN_RETURN_IF_ERROR(ExpectRank("RopeTable", "cos", cos, 2));
  TITAN_RETURN_IF_ERROR(Expect("RopeTable", "cos", cos, DType::kF32));
  TITAN_RETURN_IF_ERROR(Expect("RopeTable", "sin", sin, DType::kF32, cos.numel()));
  if (cos.shape[1] * 2 != spec.head_dim) {
    return absl::InvalidArgumentError(absl::StrCat("RopeTable: expected [seq_len, ",
                                                   spec.head_dim / 2, "] tables, found [",
                                                   cos.shape[0], ", ", cos.shape[1], "]"));
  }
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

absl::Status CudaCompute::RopeForward(const TensorView& cos, const TensorView& sin, TensorView x) {
  TITAN_RETURN_IF_ERROR(CheckRope("RopeForward", cos, sin, x));
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(LaunchRope(F(x), F(cos), F(sin), x.shape[0], x.shape[1], x.shape[2], x.shape[3],
                          1.0f, stream_),
               "RopeForward kernel launch");
}

absl::Status CudaCompute::RopeBackward(const TensorView& cos, const TensorView& sin,
                                       TensorView dx) {
  TITAN_RETURN_IF_ERROR(CheckRope("RopeBackward", cos, sin, dx));
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(LaunchRope(F(dx), F(cos), F(sin), dx.shape[0], dx.shape[1], dx.shape[2], dx.shape[3],
                          -1.0f, stream_),
               "RopeBackward kernel launch");
}

absl::Status CudaCompute::SwiGluForward(const TensorView& a, const TensorView& b, TensorView out) {
  const int64_t n = a.numel();
  TITAN_RETURN_IF_ERROR(Expect("SwiGluForward", "a", a, DType::kF32));
  TITAN_RETURN_IF_ERROR(Expect("SwiGluForward", "b", b, DType::kF32, n));
  TITAN_RETURN_IF_ERROR(Expect("SwiGluForward", "out", out, DType::kF32, n));
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(LaunchSwiGluForward(F(out), F(a), F(b), n, stream_), "SwiGluForward kernel launch");
}

absl::Status CudaCompute::SwiGluBackward(const TensorView& dout, const TensorView& a,
                                         const TensorView& b, TensorView da, TensorView db) {
  const int64_t n = a.numel();
  const std::pair<const char*, const TensorView*> operands[] = {
      {"dout", &dout}, {"a", &a}, {"b", &b}, {"da", &da}, {"db", &db}};
  for (const auto& [name, x] : operands)
    TITAN_RETURN_IF_ERROR(Expect("SwiGluBackward", name, *x, DType::kF32, n));
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(LaunchSwiGluBackward(F(da), F(db), F(dout), F(a), F(b), n, stream_),
               "SwiGluBackward kernel launch");
}

absl::Status CudaCompute::EmbeddingForward(const TensorView& tokens, const TensorView& table,
                                           int64_t first_row, TensorView out) {
  TITAN_RETURN_IF_ERROR(ExpectRank("EmbeddingForward", "table", table, 2));
  const int64_t n = tokens.numel(), c = table.shape[1];
  TITAN_RETURN_IF_ERROR(Expect("EmbeddingForward", "tokens", tokens, DType::kI32));
  TITAN_RETURN_IF_ERROR(Expect("EmbeddingForward", "table", table, DType::kF32));
  TITAN_RETURN_IF_ERROR(Expect("EmbeddingForward", "out", out, DType::kF32, n * c));
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(
      LaunchEmbeddingForward(F(out), I(tokens), F(table), n, c, first_row, table.shape[0], stream_),
      "EmbeddingForward kernel launch");
}

absl::Status CudaCompute::EmbeddingBackward(const TensorView& tokens, const TensorView& dout,
                                            int64_t first_row, TensorView dtable) {
  TITAN_RETURN_IF_ERROR(ExpectRank("EmbeddingBackward", "dtable", dtable, 2));
  const int64_t n = tokens.numel(), c = dtable.shape[1];
  TITAN_RETURN_IF_ERROR(Expect("EmbeddingBackward", "tokens", tokens, DType::kI32));
  TITAN_RETURN_IF_ERROR(Expect("EmbeddingBackward", "dtable", dtable, DType::kF32));
  TITAN_RETURN_IF_ERROR(Expect("EmbeddingBackward", "dout", dout, DType::kF32, n * c));
  TITAN_RETURN_IF_ERROR(Ready());
  return Check(LaunchEmbeddingBackward(F(dtable), F(dout), I(tokens), n, c, first_row,
                                       dtable.shape[0], stream_),
               "EmbeddingBackward kernel launch");
}

}  // namespace titan::cuda
