#include "attention_kernels.h"
#include "kernel_util.cuh"

namespace titan::cuda {
namespace {

constexpr int kWarps = 4;  // warps per block, one row (query or key) each
constexpr int kLanes = 32;
constexpr int kPerLane = static_cast<int>(kMaxAttentionHeadDim / kLanes);  // dims per lane

struct Rows {
  const AttentionDims& s;
  __device__ int64_t q(int64_t b, int64_t i, int64_t h) const {
    return ((b * s.seq_len + i) * s.heads + h) * s.head_dim;
  }
  __device__ int64_t kv(int64_t b, int64_t j, int64_t h) const {
    return ((b * s.kv_len + j) * s.kv_heads + h) * s.head_dim;
  }
  __device__ int64_t lse(int64_t b, int64_t h, int64_t i) const {
    return (b * s.heads + h) * s.seq_len + i;
  }
  // The keys query i sees: [0, visible(i)).
  __device__ int64_t visible(int64_t i) const {
    return min(max(i + s.shift + 1, int64_t{0}), s.kv_len);
  }
};

// Lane `lane` holds dims lane, lane + 32, ... of a row.
__device__ void LoadRow(float* regs, const float* row, int lane, int64_t hd) {
#pragma unroll
  for (int c = 0; c < kPerLane; ++c) {
    const int64_t d = lane + c * kLanes;
    regs[c] = d < hd ? row[d] : 0.0f;
  }
}

__device__ float Dot(const float* regs, const float* row, int lane, int64_t hd) {
  float partial = 0;
#pragma unroll
  for (int c = 0; c < kPerLane; ++c) {
    const int64_t d = lane + c * kLanes;
    if (d < hd) partial += regs[c] * row[d];
  }
  return WarpSum(partial);
}

__device__ float Scale(const AttentionDims& s) {
  return static_cast<float>(1.0 / sqrt(static_cast<double>(s.head_dim)));
}

__global__ void ForwardKernel(AttentionDims s, const float* q, const float* k, const float* v,
                              float* out, float* lse) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kWarps) + threadIdx.x / kLanes;
  if (row >= s.batch * s.heads * s.seq_len) return;
  const int lane = threadIdx.x % kLanes;
  const Rows at{s};
  const int64_t i = row % s.seq_len, h = (row / s.seq_len) % s.heads;
  const int64_t b = row / (s.seq_len * s.heads), kvh = h / (s.heads / s.kv_heads);
  const int64_t hd = s.head_dim, visible = at.visible(i);
  const float scale = Scale(s);
  float qr[kPerLane], acc[kPerLane];
  LoadRow(qr, q + at.q(b, i, h), lane, hd);
#pragma unroll
  for (int c = 0; c < kPerLane; ++c) acc[c] = 0;
  float m = -INFINITY, l = 0;
  for (int64_t j = 0; j < visible; ++j) {
    const float score = Dot(qr, k + at.kv(b, j, kvh), lane, hd) * scale;
    const float top = fmaxf(m, score);
    const float keep = expf(m - top), p = expf(score - top);
    l = l * keep + p;
    const float* vj = v + at.kv(b, j, kvh);
#pragma unroll
    for (int c = 0; c < kPerLane; ++c) {
      const int64_t d = lane + c * kLanes;
      acc[c] = acc[c] * keep + (d < hd ? p * vj[d] : 0.0f);
    }
    m = top;
  }
  float* o = out + at.q(b, i, h);
  const float inverse = visible == 0 ? 0.0f : 1.0f / l;
#pragma unroll
  for (int c = 0; c < kPerLane; ++c) {
    const int64_t d = lane + c * kLanes;
    if (d < hd) o[d] = acc[c] * inverse;
  }
  if (lane == 0) lse[at.lse(b, h, i)] = visible == 0 ? -INFINITY : m + logf(l);
}

// D_i = dout_i . out_i, one warp per query.
__global__ void RowDotKernel(AttentionDims s, const float* dout, const float* out, float* d_out) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kWarps) + threadIdx.x / kLanes;
  if (row >= s.batch * s.heads * s.seq_len) return;
  const int lane = threadIdx.x % kLanes;
  const Rows at{s};
  const int64_t i = row % s.seq_len, h = (row / s.seq_len) % s.heads;
  const int64_t b = row / (s.seq_len * s.heads);
  float regs[kPerLane];
  LoadRow(regs, dout + at.q(b, i, h), lane, s.head_dim);
  const float dot = Dot(regs, out + at.q(b, i, h), lane, s.head_dim);
  if (lane == 0) d_out[at.lse(b, h, i)] = dot;
}

// dq_i += scale * sum_j p_ij (dp_ij - D_i) k_j, one warp per query.
__global__ void QueryGradKernel(AttentionDims s, const float* dout, const float* q, const float* k,
                                const float* v, const float* lse, const float* d_out, float* dq) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kWarps) + threadIdx.x / kLanes;
  if (row >= s.batch * s.heads * s.seq_len) return;
  const int lane = threadIdx.x % kLanes;
  const Rows at{s};
  const int64_t i = row % s.seq_len, h = (row / s.seq_len) % s.heads;
  const int64_t b = row / (s.seq_len * s.heads), kvh = h / (s.heads / s.kv_heads);
  const int64_t hd = s.head_dim, visible = at.visible(i);
  if (visible == 0) return;  // no key seen: no gradient flows
  const float scale = Scale(s), row_lse = lse[at.lse(b, h, i)], di = d_out[at.lse(b, h, i)];
  float qr[kPerLane], gr[kPerLane], acc[kPerLane];
  LoadRow(qr, q + at.q(b, i, h), lane, hd);
  LoadRow(gr, dout + at.q(b, i, h), lane, hd);
#pragma unroll
  for (int c = 0; c < kPerLane; ++c) acc[c] = 0;
  for (int64_t j = 0; j < visible; ++j) {
    const float* kj = k + at.kv(b, j, kvh);
    const float p = expf(Dot(qr, kj, lane, hd) * scale - row_lse);
    const float ds = p * (Dot(gr, v + at.kv(b, j, kvh), lane, hd) - di);
#pragma unroll
    for (int c = 0; c < kPerLane; ++c) {
      const int64_t d = lane + c * kLanes;
      if (d < hd) acc[c] += ds * kj[d];
    }
  }
  float* g = dq + at.q(b, i, h);
#pragma unroll
  for (int c = 0; c < kPerLane; ++c) {
    const int64_t d = lane + c * kLanes;
    if (d < hd) g[d] += scale * acc[c];
  }
}

// dk_j += scale * sum p_ij (dp_ij - D_i) q_i and dv_j += sum p_ij dout_i over the query heads
// of kv head kvh and the queries that see key j; one warp per key.
__global__ void KeyGradKernel(AttentionDims s, const float* dout, const float* q, const float* k,
                              const float* v, const float* lse, const float* d_out, float* dk,
                              float* dv) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kWarps) + threadIdx.x / kLanes;
  if (row >= s.batch * s.kv_heads * s.kv_len) return;
  const int lane = threadIdx.x % kLanes;
  const Rows at{s};
  const int64_t j = row % s.kv_len, kvh = (row / s.kv_len) % s.kv_heads;
  const int64_t b = row / (s.kv_len * s.kv_heads), group = s.heads / s.kv_heads;
  const int64_t hd = s.head_dim, first_query = max(j - s.shift, int64_t{0});
  const float scale = Scale(s);
  float kr[kPerLane], vr[kPerLane], dk_acc[kPerLane], dv_acc[kPerLane];
  LoadRow(kr, k + at.kv(b, j, kvh), lane, hd);
  LoadRow(vr, v + at.kv(b, j, kvh), lane, hd);
#pragma unroll
  for (int c = 0; c < kPerLane; ++c) dk_acc[c] = dv_acc[c] = 0;
  for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
    for (int64_t i = first_query; i < s.seq_len; ++i) {
      const float* qi = q + at.q(b, i, h);
      const float* gi = dout + at.q(b, i, h);
      const float p = expf(Dot(kr, qi, lane, hd) * scale - lse[at.lse(b, h, i)]);
      const float ds = p * (Dot(vr, gi, lane, hd) - d_out[at.lse(b, h, i)]);
#pragma unroll
      for (int c = 0; c < kPerLane; ++c) {
        const int64_t d = lane + c * kLanes;
        if (d < hd) {
          dk_acc[c] += ds * qi[d];
          dv_acc[c] += p * gi[d];
        }
      }
    }
  }
  float* gk = dk + at.kv(b, j, kvh);
  float* gv = dv + at.kv(b, j, kvh);
#pragma unroll
  for (int c = 0; c < kPerLane; ++c) {
    const int64_t d = lane + c * kLanes;
    if (d < hd) {
      gk[d] += scale * dk_acc[c];
      gv[d] += dv_acc[c];
    }
  }
}

// One thread per (b, i, head) row.
__global__ void MergeKernel(AttentionDims s, const float* part_out, const float* part_lse,
                            float* out, float* lse) {
  const Rows at{s};
  TITAN_GRID_STRIDE(row, s.batch * s.seq_len * s.heads) {
    const int64_t h = row % s.heads, i = (row / s.heads) % s.seq_len;
    const int64_t b = row / (s.heads * s.seq_len);
    const int64_t where = at.lse(b, h, i);
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

unsigned WarpBlocks(int64_t rows) { return static_cast<unsigned>((rows + kWarps - 1) / kWarps); }

}  // namespace

cudaError_t LaunchAttentionForward(const AttentionDims& dims, const float* q, const float* k,
                                   const float* v, float* out, float* lse, cudaStream_t stream) {
  const int64_t rows = dims.batch * dims.heads * dims.seq_len;
  if (rows == 0) return cudaSuccess;
  ForwardKernel<<<WarpBlocks(rows), kWarps * kLanes, 0, stream>>>(dims, q, k, v, out, lse);
  return cudaGetLastError();
}

cudaError_t LaunchAttentionBackward(const AttentionDims& dims, const float* dout, const float* q,
                                    const float* k, const float* v, const float* out,
                                    const float* lse, float* dq, float* dk, float* dv,
                                    float* scratch, cudaStream_t stream) {
  const int64_t queries = dims.batch * dims.heads * dims.seq_len;
  const int64_t keys = dims.batch * dims.kv_heads * dims.kv_len;
  if (queries == 0) return cudaSuccess;
  RowDotKernel<<<WarpBlocks(queries), kWarps * kLanes, 0, stream>>>(dims, dout, out, scratch);
  QueryGradKernel<<<WarpBlocks(queries), kWarps * kLanes, 0, stream>>>(dims, dout, q, k, v, lse,
                                                                       scratch, dq);
  if (keys > 0) {
    KeyGradKernel<<<WarpBlocks(keys), kWarps * kLanes, 0, stream>>>(dims, dout, q, k, v, lse,
                                                                    scratch, dk, dv);
  }
  return cudaGetLastError();
}

cudaError_t LaunchAttentionMerge(const AttentionDims& dims, const float* part_out,
                                 const float* part_lse, float* out, float* lse,
                                 cudaStream_t stream) {
  const int64_t rows = dims.batch * dims.seq_len * dims.heads;
  if (rows == 0) return cudaSuccess;
  MergeKernel<<<BlocksFor(rows), kThreads, 0, stream>>>(dims, part_out, part_lse, out, lse);
  return cudaGetLastError();
}

}  // namespace titan::cuda
