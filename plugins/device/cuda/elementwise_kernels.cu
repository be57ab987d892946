#include "activation.cuh"
#include "elementwise_kernels.h"
#include "float_convert.cuh"
#include "kernel_util.cuh"

namespace titan::cuda {
namespace {

template <typename T>
__global__ void ScaleKernel(T* x, int64_t n, float scale) {
  TITAN_GRID_STRIDE(i, n) Store(x, i, Load(x, i) * scale);
}

template <typename X, typename Y>
__global__ void AccumulateKernel(const X* x, Y* out, int64_t n) {
  TITAN_GRID_STRIDE(i, n) Store(out, i, Load(out, i) + Load(x, i));
}

__device__ float Load(const void* data, FloatFormat format, int64_t i) {
  switch (format) {
    case FloatFormat::kBF16:
      return Bf16ToF32(static_cast<const uint16_t*>(data)[i]);
    case FloatFormat::kF16:
      return F16ToF32(static_cast<const uint16_t*>(data)[i]);
    default:
      return static_cast<const float*>(data)[i];
  }
}

__device__ void Store(void* data, FloatFormat format, int64_t i, float value) {
  switch (format) {
    case FloatFormat::kBF16:
      static_cast<uint16_t*>(data)[i] = F32ToBf16(value);
      break;
    case FloatFormat::kF16:
      static_cast<uint16_t*>(data)[i] = F32ToF16(value);
      break;
    default:
      static_cast<float*>(data)[i] = value;
  }
}

__global__ void CastKernel(const void* src, FloatFormat src_format, void* dst,
                           FloatFormat dst_format, int64_t n) {
  TITAN_GRID_STRIDE(i, n) Store(dst, dst_format, i, Load(src, src_format, i));
}

// Block b sums the squares of elements b, b + kSquareBlocks * kThreads, ... (strided by thread).
__global__ void PartialSquaresKernel(const float* x, int64_t n, double* partials) {
  double sum = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x; i < n;
       i += static_cast<int64_t>(kSquareBlocks) * kThreads) {
    sum += static_cast<double>(x[i]) * x[i];
  }
  sum = BlockSum(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

__global__ void FoldPartialsKernel(const double* partials, double weight, double* total) {
  double sum = 0;
  for (int i = threadIdx.x; i < kSquareBlocks; i += kThreads) sum += partials[i];
  sum = BlockSum(sum);
  if (threadIdx.x == 0) *total += weight * sum;
}

__global__ void SplitDoubleKernel(const double* total, float* out) {
  const double value = *total;
  out[0] = static_cast<float>(value);
  out[1] = isfinite(value) ? static_cast<float>(value - static_cast<double>(out[0])) : 0.0f;
}

// One thread per element of dst; T has the element's size.
template <typename T>
__global__ void TransposeKernel(const T* src, T* dst, int64_t rows, int64_t columns) {
  TITAN_GRID_STRIDE(at, rows * columns) {
    const int64_t c = at / rows, r = at % rows;
    dst[at] = src[r * columns + c];
  }
}

}  // namespace

cudaError_t LaunchScale(ActivationOut x, int64_t n, float scale, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return WithElement(x.bf16, [&](auto e) {
    return StreamLaunch{stream}(ScaleKernel<decltype(e)>, BlocksFor(n), kThreads, size_t{0},
                                As(x, e), n, scale);
  });
}

cudaError_t LaunchAccumulate(ActivationIn x, ActivationOut out, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return WithElement(x.bf16, [&](auto in) {
    return WithElement(out.bf16, [&](auto o) {
      return StreamLaunch{stream}(AccumulateKernel<decltype(in), decltype(o)>, BlocksFor(n),
                                  kThreads, size_t{0}, As(x, in), As(out, o), n);
    });
  });
}

cudaError_t LaunchCast(const void* src, FloatFormat src_format, void* dst, FloatFormat dst_format,
                       int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  CastKernel<<<BlocksFor(n), kThreads, 0, stream>>>(src, src_format, dst, dst_format, n);
  return cudaGetLastError();
}

cudaError_t LaunchSumOfSquares(const float* x, int64_t n, double weight, double* partials,
                               double* total, cudaStream_t stream) {
  PartialSquaresKernel<<<kSquareBlocks, kThreads, 0, stream>>>(x, n, partials);
  FoldPartialsKernel<<<1, kThreads, 0, stream>>>(partials, weight, total);
  return cudaGetLastError();
}

cudaError_t LaunchSplitDouble(const double* total, float* out, cudaStream_t stream) {
  SplitDoubleKernel<<<1, 1, 0, stream>>>(total, out);
  return cudaGetLastError();
}

cudaError_t LaunchTranspose(const void* src, void* dst, int64_t rows, int64_t columns,
                            int element_size, cudaStream_t stream) {
  const int64_t n = rows * columns;
  if (n == 0) return cudaSuccess;
  if (element_size == 1) {
    TransposeKernel<<<BlocksFor(n), kThreads, 0, stream>>>(static_cast<const uint8_t*>(src),
                                                           static_cast<uint8_t*>(dst), rows, columns);
  } else if (element_size == 2) {
    TransposeKernel<<<BlocksFor(n), kThreads, 0, stream>>>(
        static_cast<const uint16_t*>(src), static_cast<uint16_t*>(dst), rows, columns);
  } else {
    TransposeKernel<<<BlocksFor(n), kThreads, 0, stream>>>(
        static_cast<const uint32_t*>(src), static_cast<uint32_t*>(dst), rows, columns);
  }
  return cudaGetLastError();
}

}  // namespace titan::cuda
