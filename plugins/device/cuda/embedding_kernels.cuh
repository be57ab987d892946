// The embedding backward, sized to the device and deterministic: dtable[row] += dout[i] for every
// token i of that row, added in token order as the CPU does, so the sums are the CPU's bit for
// bit. A block owns kThreads columns and the table rows of one bucket (row % buckets): it walks
// the tokens in chunks, gathers the positions of its bucket's tokens in order (a block-wide
// prefix count of ballots), and each thread adds their rows of dout into its column. Every
// (row, column) has one owner: no atomics. There are enough buckets to fill the GPU
// (BackwardBuckets), where one thread per column gave a 2048-wide table 8 blocks.
#ifndef TITAN_PLUGINS_DEVICE_CUDA_EMBEDDING_KERNELS_CUH_
#define TITAN_PLUGINS_DEVICE_CUDA_EMBEDDING_KERNELS_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "activation.cuh"
#include "kernel_util.cuh"

namespace titan::cuda::embedding {

constexpr int kWarps = kThreads / 32;
constexpr int64_t kResidentThreadsPerSm = 2048;  // sm_80 and sm_90
constexpr int64_t kMaxBuckets = 1024;

// Buckets of table rows for a table `columns` wide with `rows` rows on a GPU of `sms`
// multiprocessors: enough blocks to give every multiprocessor its full count of threads, at most
// one bucket per row (and kMaxBuckets: each block reads every token).
inline int64_t BackwardBuckets(int64_t columns, int64_t rows, int sms) {
  const int64_t column_threads = (columns + kThreads - 1) / kThreads * kThreads;
  if (column_threads == 0) return 1;
  int64_t buckets = (sms * kResidentThreadsPerSm + column_threads - 1) / column_threads;
  if (buckets > rows) buckets = rows;
  if (buckets > kMaxBuckets) buckets = kMaxBuckets;
  return buckets < 1 ? 1 : buckets;
}

// Block b: columns [kThreads (b % column_blocks), + kThreads) of the rows of bucket
// b / column_blocks.
template <typename Dy>
__global__ void BackwardKernel(float* dtable, const Dy* dout, const int32_t* tokens, int64_t n,
                               int64_t c, int64_t first_row, int64_t rows, int64_t buckets,
                               int64_t column_blocks) {
  __shared__ int64_t positions[kThreads], rows_at[kThreads];
  __shared__ int warp_counts[kWarps];
  const int64_t j = (blockIdx.x % column_blocks) * kThreads + threadIdx.x;
  const int64_t bucket = blockIdx.x / column_blocks;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int64_t first = 0; first < n; first += kThreads) {
    const int64_t i = first + threadIdx.x;
    const int64_t row = i < n ? tokens[i] - first_row : -1;
    const bool mine = row >= 0 && row < rows && row % buckets == bucket;
    const unsigned ballot = __ballot_sync(0xffffffffu, mine);
    if (lane == 0) warp_counts[warp] = __popc(ballot);
    __syncthreads();
    // This token's place among the chunk's tokens of the bucket, in token order.
    int offset = __popc(ballot & ((1u << lane) - 1u)), count = 0;
    for (int w = 0; w < kWarps; ++w) {
      if (w < warp) offset += warp_counts[w];
      count += warp_counts[w];
    }
    if (mine) {
      positions[offset] = i;
      rows_at[offset] = row;
    }
    __syncthreads();
    if (j < c) {
      for (int k = 0; k < count; ++k)
        dtable[rows_at[k] * c + j] += Load(dout, positions[k] * c + j);
    }
    __syncthreads();  // the next chunk rewrites the positions and counts
  }
}

// Through launch(kernel, blocks, threads, shared_bytes, arguments...), as attention_kernels.cuh;
// dout f32 or bf16 (activation.cuh).
template <typename Launch>
cudaError_t RunBackward(Launch&& launch, float* dtable, ActivationIn dout, const int32_t* tokens,
                        int64_t n, int64_t c, int64_t first_row, int64_t rows, int64_t buckets) {
  if (n * c == 0 || rows == 0) return cudaSuccess;
  const int64_t column_blocks = (c + kThreads - 1) / kThreads;
  return WithElement(dout.bf16, [&](auto dy) {
    return launch(BackwardKernel<decltype(dy)>, column_blocks * buckets, kThreads, size_t{0},
                  dtable, As(dout, dy), tokens, n, c, first_row, rows, buckets, column_blocks);
  });
}

}  // namespace titan::cuda::embedding

#endif  // TITAN_PLUGINS_DEVICE_CUDA_EMBEDDING_KERNELS_CUH_
