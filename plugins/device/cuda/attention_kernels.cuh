// titan's f32 attention kernels, flash-attention style (FlashAttention-2's loop order): a block
// holds a tile of queries (or keys) in shared memory and walks the tiles of keys (or queries)
// its causal mask lets it see, so no [t, t] score matrix exists. Scores and products are small
// GEMMs out of shared memory (TileProduct), each thread owning a few rows and columns.
//   forward: per query tile, an online softmax over the key tiles; out and the log-sum-exp.
//   backward: D_i = dout_i . out_i per query; then per key tile dk and dv over every query tile
//   and query head that sees it; then per query tile dq over the key tiles it sees. The
//   probabilities are recomputed from the saved log-sum-exp, and every sum has one owner that adds
//   in a fixed order: no atomics, and results repeat bit for bit.
// The host side (Run*, templated on how a kernel is launched) is shared by attention_kernels.cu
// and the CPU emulation test (attention_emulation_test.cc).
#ifndef TITAN_PLUGINS_DEVICE_CUDA_ATTENTION_KERNELS_CUH_
#define TITAN_PLUGINS_DEVICE_CUDA_ATTENTION_KERNELS_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "attention_tiles.h"
#include "kernel_util.cuh"

namespace titan::cuda::attention {

constexpr int kSide = kAttentionThreadsPerSide;
constexpr int kRowDotWarps = 4;  // rows per block of RowDotKernel, one warp each

__device__ inline float ScaleOf(const AttentionDims& s) {
  return static_cast<float>(1.0 / sqrt(static_cast<double>(s.head_dim)));
}

__device__ inline int64_t QueryAt(const AttentionDims& s, int64_t b, int64_t i, int64_t h) {
  return ((b * s.seq_len + i) * s.heads + h) * s.head_dim;
}
__device__ inline int64_t KeyAt(const AttentionDims& s, int64_t b, int64_t j, int64_t h) {
  return ((b * s.kv_len + j) * s.kv_heads + h) * s.head_dim;
}
__device__ inline int64_t LseAt(const AttentionDims& s, int64_t b, int64_t h, int64_t i) {
  return (b * s.heads + h) * s.seq_len + i;
}

// Rows [first, first + count) of head h of x [batch, rows, heads, head_dim] into tile [count,
// PaddedRow(kD)]; rows past `rows` and dimensions past head_dim read as zeros.
template <int kD>
__device__ void LoadTile(float* tile, int count, const float* x, int64_t b, int64_t first,
                         int64_t rows, int64_t heads, int64_t h, int64_t head_dim) {
  for (int e = threadIdx.x; e < count * kD; e += kAttentionThreads) {
    const int r = e / kD, d = e % kD;
    const int64_t row = first + r;
    tile[r * PaddedRow(kD) + d] =
        row < rows && d < head_dim ? x[((b * rows + row) * heads + h) * head_dim + d] : 0.0f;
  }
}

// acc[i][j] += sum over p < kK of A(row0 + i, p) * B(p, col0 + kSide * j), where A(r, p) =
// a[r * a_row + p] and B(p, c) = b[p * b_step + c * b_column]: the rows a thread owns times the
// columns it owns. Rows of a warp's threads are broadcasts; columns walk 16 banks (padded rows).
template <int kR, int kC, int kK>
__device__ __forceinline__ void TileProduct(float (&acc)[kR][kC], const float* a, int a_row,
                                            int row0, const float* b, int b_step, int b_column,
                                            int col0) {
#pragma unroll 4
  for (int p = 0; p < kK; ++p) {
    float a_values[kR], b_values[kC];
#pragma unroll
    for (int i = 0; i < kR; ++i) a_values[i] = a[(row0 + i) * a_row + p];
#pragma unroll
    for (int j = 0; j < kC; ++j) b_values[j] = b[p * b_step + (col0 + kSide * j) * b_column];
#pragma unroll
    for (int i = 0; i < kR; ++i) {
#pragma unroll
      for (int j = 0; j < kC; ++j) acc[i][j] += a_values[i] * b_values[j];
    }
  }
}

// The max and the sum over the 16 threads that share a row (lanes of one half-warp).
__device__ inline float RowMax(float value) {
  for (int offset = kSide / 2; offset > 0; offset /= 2) {
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  }
  return value;
}
__device__ inline float RowSum(float value) {
  for (int offset = kSide / 2; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  }
  return value;
}

template <int kD>
__global__ void __launch_bounds__(kAttentionThreads)
    ForwardKernel(AttentionDims s, const float* __restrict__ q, const float* __restrict__ k,
                  const float* __restrict__ v, float* __restrict__ out, float* __restrict__ lse) {
  constexpr AttentionTile kTile = TileOf(AttentionPass::kForward, kD);
  constexpr int kRow = PaddedRow(kD), kProbabilityRow = PaddedRow(kTile.keys);
  constexpr int kR = kTile.queries / kSide, kC = kTile.keys / kSide, kDims = kD / kSide;
  float* q_tile = DynamicSharedFloats();
  float* k_tile = q_tile + kTile.queries * kRow;
  float* v_tile = k_tile + kTile.keys * kRow;
  float* p_tile = v_tile + kTile.keys * kRow;
  const int ty = threadIdx.x / kSide, tx = threadIdx.x % kSide;
  const int64_t bh = blockIdx.x % HeadsOf(s, AttentionPass::kForward);
  const int64_t b = bh / s.heads, h = bh % s.heads, kvh = h / (s.heads / s.kv_heads);
  const int64_t i0 = TileOfBlock(s, AttentionPass::kForward, blockIdx.x) * kTile.queries;
  const float scale = ScaleOf(s);
  LoadTile<kD>(q_tile, kTile.queries, q, b, i0, s.seq_len, s.heads, h, s.head_dim);
  // Per row: the running max, this thread's part of the running sum, the output so far.
  float top[kR], sum[kR], o[kR][kDims];
  int64_t visible[kR];
#pragma unroll
  for (int i = 0; i < kR; ++i) {
    top[i] = -INFINITY;
    sum[i] = 0.0f;
    visible[i] = VisibleKeys(s, i0 + ty * kR + i);
#pragma unroll
    for (int d = 0; d < kDims; ++d) o[i][d] = 0.0f;
  }
  const int64_t key_tiles = KeyTilesSeenBy(s, i0, kTile);
  for (int64_t tile = 0; tile < key_tiles; ++tile) {
    const int64_t j0 = tile * kTile.keys;
    __syncthreads();  // the previous tile is read
    LoadTile<kD>(k_tile, kTile.keys, k, b, j0, s.kv_len, s.kv_heads, kvh, s.head_dim);
    LoadTile<kD>(v_tile, kTile.keys, v, b, j0, s.kv_len, s.kv_heads, kvh, s.head_dim);
    __syncthreads();
    float score[kR][kC] = {};
    TileProduct<kR, kC, kD>(score, q_tile, kRow, ty * kR, k_tile, 1, kRow, tx);
#pragma unroll
    for (int i = 0; i < kR; ++i) {
      float tile_top = -INFINITY;
#pragma unroll
      for (int j = 0; j < kC; ++j) {
        const bool seen = j0 + tx + kSide * j < visible[i];
        score[i][j] = seen ? score[i][j] * scale : -INFINITY;
        tile_top = fmaxf(tile_top, score[i][j]);
      }
      const float new_top = fmaxf(top[i], RowMax(tile_top));
      // Until a row has seen a key its max stays -inf and its sums zero.
      const float keep = new_top == -INFINITY ? 1.0f : expf(top[i] - new_top);
      float tile_sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kC; ++j) {
        const float p = score[i][j] == -INFINITY ? 0.0f : expf(score[i][j] - new_top);
        p_tile[(ty * kR + i) * kProbabilityRow + tx + kSide * j] = p;
        tile_sum += p;
      }
      sum[i] = sum[i] * keep + tile_sum;
#pragma unroll
      for (int d = 0; d < kDims; ++d) o[i][d] *= keep;
      top[i] = new_top;
    }
    __syncthreads();
    TileProduct<kR, kDims, kTile.keys>(o, p_tile, kProbabilityRow, ty * kR, v_tile, kRow, 1, tx);
  }
#pragma unroll
  for (int i = 0; i < kR; ++i) {
    const float total = RowSum(sum[i]);
    const int64_t row = i0 + ty * kR + i;
    if (row >= s.seq_len) continue;
    const float inverse = visible[i] == 0 ? 0.0f : 1.0f / total;
    float* o_row = out + QueryAt(s, b, row, h);
#pragma unroll
    for (int j = 0; j < kDims; ++j) {
      const int d = tx + kSide * j;
      if (d < s.head_dim) o_row[d] = o[i][j] * inverse;
    }
    if (tx == 0) lse[LseAt(s, b, h, row)] = visible[i] == 0 ? -INFINITY : top[i] + logf(total);
  }
}

// D_i = dout_i . out_i, one warp per query (b, h, i).
__global__ void RowDotKernel(AttentionDims s, const float* __restrict__ dout,
                             const float* __restrict__ out, float* __restrict__ dots) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kRowDotWarps) + threadIdx.x / 32;
  if (row >= s.batch * s.heads * s.seq_len) return;
  const int lane = threadIdx.x % 32;
  const int64_t i = row % s.seq_len, h = (row / s.seq_len) % s.heads;
  const int64_t b = row / (s.seq_len * s.heads);
  const float* g = dout + QueryAt(s, b, i, h);
  const float* o = out + QueryAt(s, b, i, h);
  float partial = 0.0f;
  for (int64_t d = lane; d < s.head_dim; d += 32) partial += g[d] * o[d];
  partial = WarpSum(partial);
  if (lane == 0) dots[LseAt(s, b, h, i)] = partial;
}

// dk_j += scale sum_i ds_ij q_i and dv_j += sum_i p_ij dout_i over the query heads of kv head kvh
// and the queries that see key j, with p_ij = exp(scale q_i . k_j - lse_i) and ds_ij = p_ij
// (dout_i . v_j - D_i).
template <int kD>
__global__ void __launch_bounds__(kAttentionThreads)
    KeyGradKernel(AttentionDims s, const float* __restrict__ dout, const float* __restrict__ q,
                  const float* __restrict__ k, const float* __restrict__ v,
                  const float* __restrict__ lse, const float* __restrict__ dots,
                  float* __restrict__ dk, float* __restrict__ dv) {
  constexpr AttentionTile kTile = TileOf(AttentionPass::kKeyGrad, kD);
  constexpr int kRow = PaddedRow(kD), kQueryRow = PaddedRow(kTile.queries);
  constexpr int kR = kTile.keys / kSide, kC = kTile.queries / kSide, kDims = kD / kSide;
  float* k_tile = DynamicSharedFloats();
  float* v_tile = k_tile + kTile.keys * kRow;
  float* q_tile = v_tile + kTile.keys * kRow;
  float* g_tile = q_tile + kTile.queries * kRow;       // dout
  float* p_tile = g_tile + kTile.queries * kRow;       // p^T [keys, queries]
  float* ds_tile = p_tile + kTile.keys * kQueryRow;    // ds^T [keys, queries]
  float* lse_tile = ds_tile + kTile.keys * kQueryRow;  // per query
  float* dot_tile = lse_tile + kTile.queries;          // D per query
  const int ty = threadIdx.x / kSide, tx = threadIdx.x % kSide;
  const int64_t bh = blockIdx.x % HeadsOf(s, AttentionPass::kKeyGrad);
  const int64_t b = bh / s.kv_heads, kvh = bh % s.kv_heads, group = s.heads / s.kv_heads;
  const int64_t j0 = TileOfBlock(s, AttentionPass::kKeyGrad, blockIdx.x) * kTile.keys;
  const float scale = ScaleOf(s);
  LoadTile<kD>(k_tile, kTile.keys, k, b, j0, s.kv_len, s.kv_heads, kvh, s.head_dim);
  LoadTile<kD>(v_tile, kTile.keys, v, b, j0, s.kv_len, s.kv_heads, kvh, s.head_dim);
  float dk_acc[kR][kDims] = {}, dv_acc[kR][kDims] = {};
  const int64_t first_tile = FirstQueryTileSeeing(s, j0, kTile);
  const int64_t query_tiles = CeilDiv(s.seq_len, kTile.queries);
  for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
    for (int64_t tile = first_tile; tile < query_tiles; ++tile) {
      const int64_t i0 = tile * kTile.queries;
      __syncthreads();  // the previous tile is read
      LoadTile<kD>(q_tile, kTile.queries, q, b, i0, s.seq_len, s.heads, h, s.head_dim);
      LoadTile<kD>(g_tile, kTile.queries, dout, b, i0, s.seq_len, s.heads, h, s.head_dim);
      for (int r = threadIdx.x; r < kTile.queries; r += kAttentionThreads) {
        const bool inside = i0 + r < s.seq_len;
        lse_tile[r] = inside ? lse[LseAt(s, b, h, i0 + r)] : 0.0f;
        dot_tile[r] = inside ? dots[LseAt(s, b, h, i0 + r)] : 0.0f;
      }
      __syncthreads();
      float score[kR][kC] = {}, dp[kR][kC] = {};
      TileProduct<kR, kC, kD>(score, k_tile, kRow, ty * kR, q_tile, 1, kRow, tx);
      TileProduct<kR, kC, kD>(dp, v_tile, kRow, ty * kR, g_tile, 1, kRow, tx);
#pragma unroll
      for (int i = 0; i < kR; ++i) {
#pragma unroll
        for (int j = 0; j < kC; ++j) {
          const int r = tx + kSide * j;
          const int64_t query = i0 + r, key = j0 + ty * kR + i;
          const bool seen = query < s.seq_len && key < VisibleKeys(s, query);
          const float p = seen ? expf(score[i][j] * scale - lse_tile[r]) : 0.0f;
          p_tile[(ty * kR + i) * kQueryRow + r] = p;
          ds_tile[(ty * kR + i) * kQueryRow + r] = p * (dp[i][j] - dot_tile[r]);
        }
      }
      __syncthreads();
      TileProduct<kR, kDims, kTile.queries>(dv_acc, p_tile, kQueryRow, ty * kR, g_tile, kRow, 1,
                                            tx);
      TileProduct<kR, kDims, kTile.queries>(dk_acc, ds_tile, kQueryRow, ty * kR, q_tile, kRow, 1,
                                            tx);
    }
  }
#pragma unroll
  for (int i = 0; i < kR; ++i) {
    const int64_t key = j0 + ty * kR + i;
    if (key >= s.kv_len) continue;
    float* gk = dk + KeyAt(s, b, key, kvh);
    float* gv = dv + KeyAt(s, b, key, kvh);
#pragma unroll
    for (int j = 0; j < kDims; ++j) {
      const int d = tx + kSide * j;
      if (d < s.head_dim) {
        gk[d] += scale * dk_acc[i][j];
        gv[d] += dv_acc[i][j];
      }
    }
  }
}

// dq_i += scale sum_j ds_ij k_j over the keys query i sees.
template <int kD>
__global__ void __launch_bounds__(kAttentionThreads)
    QueryGradKernel(AttentionDims s, const float* __restrict__ dout, const float* __restrict__ q,
                    const float* __restrict__ k, const float* __restrict__ v,
                    const float* __restrict__ lse, const float* __restrict__ dots,
                    float* __restrict__ dq) {
  constexpr AttentionTile kTile = TileOf(AttentionPass::kQueryGrad, kD);
  constexpr int kRow = PaddedRow(kD), kKeyRow = PaddedRow(kTile.keys);
  constexpr int kR = kTile.queries / kSide, kC = kTile.keys / kSide, kDims = kD / kSide;
  float* q_tile = DynamicSharedFloats();
  float* g_tile = q_tile + kTile.queries * kRow;  // dout
  float* k_tile = g_tile + kTile.queries * kRow;
  float* v_tile = k_tile + kTile.keys * kRow;
  float* ds_tile = v_tile + kTile.keys * kRow;  // [queries, keys]
  const int ty = threadIdx.x / kSide, tx = threadIdx.x % kSide;
  const int64_t bh = blockIdx.x % HeadsOf(s, AttentionPass::kQueryGrad);
  const int64_t b = bh / s.heads, h = bh % s.heads, kvh = h / (s.heads / s.kv_heads);
  const int64_t i0 = TileOfBlock(s, AttentionPass::kQueryGrad, blockIdx.x) * kTile.queries;
  const float scale = ScaleOf(s);
  LoadTile<kD>(q_tile, kTile.queries, q, b, i0, s.seq_len, s.heads, h, s.head_dim);
  LoadTile<kD>(g_tile, kTile.queries, dout, b, i0, s.seq_len, s.heads, h, s.head_dim);
  float row_lse[kR], row_dot[kR], acc[kR][kDims];
  int64_t visible[kR];
#pragma unroll
  for (int i = 0; i < kR; ++i) {
    const int64_t row = i0 + ty * kR + i;
    const bool inside = row < s.seq_len;
    row_lse[i] = inside ? lse[LseAt(s, b, h, row)] : 0.0f;
    row_dot[i] = inside ? dots[LseAt(s, b, h, row)] : 0.0f;
    visible[i] = inside ? VisibleKeys(s, row) : 0;
#pragma unroll
    for (int d = 0; d < kDims; ++d) acc[i][d] = 0.0f;
  }
  const int64_t key_tiles = KeyTilesSeenBy(s, i0, kTile);
  for (int64_t tile = 0; tile < key_tiles; ++tile) {
    const int64_t j0 = tile * kTile.keys;
    __syncthreads();  // the previous tile is read
    LoadTile<kD>(k_tile, kTile.keys, k, b, j0, s.kv_len, s.kv_heads, kvh, s.head_dim);
    LoadTile<kD>(v_tile, kTile.keys, v, b, j0, s.kv_len, s.kv_heads, kvh, s.head_dim);
    __syncthreads();
    float score[kR][kC] = {}, dp[kR][kC] = {};
    TileProduct<kR, kC, kD>(score, q_tile, kRow, ty * kR, k_tile, 1, kRow, tx);
    TileProduct<kR, kC, kD>(dp, g_tile, kRow, ty * kR, v_tile, 1, kRow, tx);
#pragma unroll
    for (int i = 0; i < kR; ++i) {
#pragma unroll
      for (int j = 0; j < kC; ++j) {
        const bool seen = j0 + tx + kSide * j < visible[i];
        const float p = seen ? expf(score[i][j] * scale - row_lse[i]) : 0.0f;
        ds_tile[(ty * kR + i) * kKeyRow + tx + kSide * j] = p * (dp[i][j] - row_dot[i]);
      }
    }
    __syncthreads();
    TileProduct<kR, kDims, kTile.keys>(acc, ds_tile, kKeyRow, ty * kR, k_tile, kRow, 1, tx);
  }
#pragma unroll
  for (int i = 0; i < kR; ++i) {
    if (visible[i] == 0) continue;  // no key seen (or past the queries): no gradient flows
    float* g = dq + QueryAt(s, b, i0 + ty * kR + i, h);
#pragma unroll
    for (int j = 0; j < kDims; ++j) {
      const int d = tx + kSide * j;
      if (d < s.head_dim) g[d] += scale * acc[i][j];
    }
  }
}

// Folds part_out / part_lse into out / lse, one thread per (b, i, head) row.
__global__ void MergeKernel(AttentionDims s, const float* part_out, const float* part_lse,
                            float* out, float* lse) {
  TITAN_GRID_STRIDE(row, s.batch * s.seq_len * s.heads) {
    const int64_t h = row % s.heads, i = (row / s.heads) % s.seq_len;
    const int64_t b = row / (s.heads * s.seq_len);
    const int64_t where = LseAt(s, b, h, i);
    const float mine = lse[where], theirs = part_lse[where];
    if (theirs == -INFINITY) continue;
    float* o = out + row * s.head_dim;
    const float* part = part_out + row * s.head_dim;
    if (mine == -INFINITY) {
      for (int64_t d = 0; d < s.head_dim; ++d) o[d] = part[d];
      lse[where] = theirs;
      continue;
    }
    const float top = fmaxf(mine, theirs);
    const float merged = top + logf(expf(mine - top) + expf(theirs - top));
    const float keep = expf(mine - merged), add = expf(theirs - merged);
    for (int64_t d = 0; d < s.head_dim; ++d) o[d] = o[d] * keep + part[d] * add;
    lse[where] = merged;
  }
}

// The passes, each through launch(kernel, blocks, threads, shared_bytes, arguments...), which
// returns the launch's cudaError_t. A head_dim past kMaxAttentionHeadDim is refused before.
template <typename Launch>
cudaError_t RunForward(Launch&& launch, const AttentionDims& s, const float* q, const float* k,
                       const float* v, float* out, float* lse) {
  if (s.batch * s.heads * s.seq_len == 0) return cudaSuccess;
  const int64_t blocks = BlocksOf(s, AttentionPass::kForward);
  switch (HeadDimBucket(s.head_dim)) {
    case 64:
      return launch(ForwardKernel<64>, blocks, kAttentionThreads,
                    SharedBytesOf(AttentionPass::kForward, 64), s, q, k, v, out, lse);
    case 128:
      return launch(ForwardKernel<128>, blocks, kAttentionThreads,
                    SharedBytesOf(AttentionPass::kForward, 128), s, q, k, v, out, lse);
    case 256:
      return launch(ForwardKernel<256>, blocks, kAttentionThreads,
                    SharedBytesOf(AttentionPass::kForward, 256), s, q, k, v, out, lse);
  }
  return cudaErrorInvalidValue;
}

template <int kD, typename Launch>
cudaError_t RunGradients(Launch&& launch, const AttentionDims& s, const float* dout, const float* q,
                         const float* k, const float* v, const float* lse, const float* dots,
                         float* dq, float* dk, float* dv) {
  if (s.batch * s.kv_heads * s.kv_len > 0) {
    const cudaError_t error =
        launch(KeyGradKernel<kD>, BlocksOf(s, AttentionPass::kKeyGrad), kAttentionThreads,
               SharedBytesOf(AttentionPass::kKeyGrad, kD), s, dout, q, k, v, lse, dots, dk, dv);
    if (error != cudaSuccess) return error;
  }
  return launch(QueryGradKernel<kD>, BlocksOf(s, AttentionPass::kQueryGrad), kAttentionThreads,
                SharedBytesOf(AttentionPass::kQueryGrad, kD), s, dout, q, k, v, lse, dots, dq);
}

// `dots` holds batch * heads * seq_len floats of scratch.
template <typename Launch>
cudaError_t RunBackward(Launch&& launch, const AttentionDims& s, const float* dout, const float* q,
                        const float* k, const float* v, const float* out, const float* lse,
                        float* dq, float* dk, float* dv, float* dots) {
  const int64_t queries = s.batch * s.heads * s.seq_len;
  if (queries == 0) return cudaSuccess;
  const cudaError_t error = launch(RowDotKernel, CeilDiv(queries, kRowDotWarps), kRowDotWarps * 32,
                                   size_t{0}, s, dout, out, dots);
  if (error != cudaSuccess) return error;
  switch (HeadDimBucket(s.head_dim)) {
    case 64:
      return RunGradients<64>(launch, s, dout, q, k, v, lse, dots, dq, dk, dv);
    case 128:
      return RunGradients<128>(launch, s, dout, q, k, v, lse, dots, dq, dk, dv);
    case 256:
      return RunGradients<256>(launch, s, dout, q, k, v, lse, dots, dq, dk, dv);
  }
  return cudaErrorInvalidValue;
}

template <typename Launch>
cudaError_t RunMerge(Launch&& launch, const AttentionDims& s, const float* part_out,
                     const float* part_lse, float* out, float* lse) {
  const int64_t rows = s.batch * s.seq_len * s.heads;
  if (rows == 0) return cudaSuccess;
  return launch(MergeKernel, int64_t{BlocksFor(rows)}, kThreads, size_t{0}, s, part_out, part_lse,
                out, lse);
}

}  // namespace titan::cuda::attention

#endif  // TITAN_PLUGINS_DEVICE_CUDA_ATTENTION_KERNELS_CUH_
