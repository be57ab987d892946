// The mixture-of-experts kernels, each the arithmetic of the CPU backend's
// (core/cpu/cpu_compute_moe.cc) in the same order, so that the results are the CPU's bits (the
// routing's f64 exponentials aside, which nvcc's library may round differently in the last
// place): the router and its backward one thread per token; the permutation as a stable counting
// sort in three passes over tiles of kThreads assignments (count, prefix, place), deterministic
// without atomics; dispatch, combine and their gradients one thread per element, the combine's
// products and sums rounded one by one (__fmul_rn, __fadd_rn: no FMA), the weights' gradient one
// warp per assignment. An expert id or a slot out of range is skipped, never followed; the
// permutation reports the first such expert id.
#ifndef TITAN_PLUGINS_DEVICE_CUDA_MOE_KERNELS_CUH_
#define TITAN_PLUGINS_DEVICE_CUDA_MOE_KERNELS_CUH_

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernel_util.cuh"
#include "moe_kernels.h"

namespace titan::cuda::moe {

// --- Routing ---------------------------------------------------------------------------------

// Whether value a (at index ia) ranks before value b (at index ib): larger first, a NaN after
// every number, ties to the lower index. A strict total order, so any search gives the same best.
__device__ inline bool RanksBefore(float a, int64_t ia, float b, int64_t ib) {
  const bool a_nan = isnan(a), b_nan = isnan(b);
  if (a_nan != b_nan) return b_nan;
  if (!a_nan && a != b) return a > b;
  return ia < ib;
}

// The best i in [first, end) with allowed(i) that ranks after `after` (-1: none), by value(i).
template <typename Value, typename Allowed>
__device__ int64_t NextBest(const Value& value, const Allowed& allowed, int64_t first, int64_t end,
                            int64_t after) {
  int64_t best = -1;
  for (int64_t i = first; i < end; ++i) {
    if (!allowed(i)) continue;
    if (after >= 0 && !RanksBefore(value(after), after, value(i), i)) continue;
    if (best < 0 || RanksBefore(value(i), i, value(best), best)) best = i;
  }
  return best;
}

// One token's scores: a softmax (exponentials summed in order in f64) or sigmoids, rounded to f32.
__device__ inline void Scores(const float* logits, int64_t experts, bool sigmoid, float* scores) {
  if (sigmoid) {
    for (int64_t e = 0; e < experts; ++e) {
      scores[e] = static_cast<float>(1.0 / (1.0 + exp(-static_cast<double>(logits[e]))));
    }
    return;
  }
  float top = logits[0];
  for (int64_t e = 1; e < experts; ++e) {
    if (logits[e] > top) top = logits[e];
  }
  double sum = 0;
  for (int64_t e = 0; e < experts; ++e) sum += exp(static_cast<double>(logits[e]) - top);
  for (int64_t e = 0; e < experts; ++e) {
    scores[e] = static_cast<float>(exp(static_cast<double>(logits[e]) - top) / sum);
  }
}

// Thread t routes token t; its scores go to scores[t * experts, ...) and, with groups, its
// groups' scores to group_scores[t * groups, ...) (scratch).
__global__ void RouteKernel(const float* logits, const float* bias, MoeRoutingArgs routing,
                            int64_t n, int64_t experts, float* scores_scratch,
                            float* group_scores_scratch, int32_t* chosen, float* weights) {
  TITAN_GRID_STRIDE(t, n) {
    float* scores = scores_scratch + t * experts;
    Scores(logits + t * experts, experts, routing.sigmoid, scores);
    const auto choice = [&](int64_t e) {
      return bias != nullptr ? scores[e] + bias[e] : scores[e];
    };
    const auto any = [](int64_t) { return true; };
    const int64_t groups = routing.groups, size = experts / groups;
    float* group_scores = group_scores_scratch + t * groups;
    int64_t last_group = -1;  // the worst of the groups chosen
    if (groups > 1) {
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t first = NextBest(choice, any, g * size, (g + 1) * size, -1);
        const int64_t second = NextBest(choice, any, g * size, (g + 1) * size, first);
        group_scores[g] = second < 0 ? choice(first) : choice(first) + choice(second);
      }
      const auto group_score = [&](int64_t g) { return group_scores[g]; };
      for (int64_t c = 0; c < routing.groups_chosen; ++c) {
        last_group = NextBest(group_score, any, 0, groups, last_group);
      }
    }
    const auto eligible = [&](int64_t e) {
      if (groups <= 1) return true;
      const int64_t g = e / size;
      return g == last_group ||
             RanksBefore(group_scores[g], g, group_scores[last_group], last_group);
    };
    int32_t* ids = chosen + t * routing.top_k;
    float* w = weights + t * routing.top_k;
    int64_t expert = -1;
    float sum = 0.0f;
    for (int64_t j = 0; j < routing.top_k; ++j) {
      expert = NextBest(choice, eligible, 0, experts, expert);
      ids[j] = static_cast<int32_t>(expert);
      w[j] = scores[expert];
      sum += w[j];
    }
    const float denominator = sum + 1e-20f;
    for (int64_t j = 0; j < routing.top_k; ++j) {
      if (routing.normalize) w[j] = w[j] / denominator;
      w[j] = w[j] * routing.scale;
    }
  }
}

// One token's score of expert e, from its logits' largest value and sum of exponentials.
__device__ inline float ScoreOf(const float* logits, int64_t e, bool sigmoid, float top,
                                double sum) {
  if (sigmoid) return static_cast<float>(1.0 / (1.0 + exp(-static_cast<double>(logits[e]))));
  return static_cast<float>(exp(static_cast<double>(logits[e]) - top) / sum);
}

// Thread t: d_logits[t] from d_weights[t] through the normalization, the scale and the scores,
// in f64 (the CPU's RunMoeRouteBackward, term for term).
__global__ void RouteBackwardKernel(const float* logits, const int32_t* chosen,
                                    const float* d_weights, MoeRoutingArgs routing, int64_t n,
                                    int64_t experts, float* d_logits) {
  TITAN_GRID_STRIDE(t, n) {
    const float* l = logits + t * experts;
    float top = l[0];
    double exp_sum = 0;
    if (!routing.sigmoid) {
      for (int64_t e = 1; e < experts; ++e) {
        if (l[e] > top) top = l[e];
      }
      for (int64_t e = 0; e < experts; ++e) exp_sum += exp(static_cast<double>(l[e]) - top);
    }
    const int32_t* ids = chosen + t * routing.top_k;
    const float* g = d_weights + t * routing.top_k;
    const auto valid = [&](int64_t j) { return ids[j] >= 0 && ids[j] < experts; };
    double sum = 0, g_dot_p = 0;
    for (int64_t j = 0; j < routing.top_k; ++j) {
      if (!valid(j)) continue;
      const float p = ScoreOf(l, ids[j], routing.sigmoid, top, exp_sum);
      sum += p;
      g_dot_p += static_cast<double>(g[j]) * p;
    }
    const double denominator = sum + 1e-20;
    // The score gradient of expert x: the chosen's terms, in the order j of the choice.
    const auto d_score = [&](int64_t x) {
      double d = 0.0;
      for (int64_t j = 0; j < routing.top_k; ++j) {
        if (ids[j] != x) continue;
        const double d_p = routing.normalize
                               ? g[j] / denominator - g_dot_p / (denominator * denominator)
                               : static_cast<double>(g[j]);
        d += routing.scale * d_p;
      }
      return d;
    };
    float* out = d_logits + t * experts;
    if (routing.sigmoid) {
      for (int64_t x = 0; x < experts; ++x) {
        const double s = ScoreOf(l, x, true, top, exp_sum);
        out[x] = static_cast<float>(d_score(x) * s * (1.0 - s));
      }
      continue;
    }
    double d_dot_s = 0;
    for (int64_t x = 0; x < experts; ++x) {
      d_dot_s += d_score(x) * ScoreOf(l, x, false, top, exp_sum);
    }
    for (int64_t x = 0; x < experts; ++x) {
      const double s = ScoreOf(l, x, false, top, exp_sum);
      out[x] = static_cast<float>(s * (d_score(x) - d_dot_s));
    }
  }
}

inline size_t RouteScratchBytes(int64_t n, int64_t experts, int64_t groups) {
  return static_cast<size_t>(n * (experts + groups)) * sizeof(float);
}

// Through launch(kernel, blocks, threads, shared_bytes, arguments...), as attention_kernels.cuh;
// scratch holds RouteScratchBytes.
template <typename Launch>
cudaError_t RunRoute(Launch&& launch, const float* logits, const float* bias,
                     const MoeRoutingArgs& routing, int64_t n, int64_t experts, int32_t* chosen,
                     float* weights, void* scratch) {
  float* scores = static_cast<float*>(scratch);
  return launch(RouteKernel, BlocksFor(n), kThreads, size_t{0}, logits, bias, routing, n, experts,
                scores, scores + n * experts, chosen, weights);
}

template <typename Launch>
cudaError_t RunRouteBackward(Launch&& launch, const float* logits, const int32_t* chosen,
                             const float* d_weights, const MoeRoutingArgs& routing, int64_t n,
                             int64_t experts, float* d_logits) {
  return launch(RouteBackwardKernel, BlocksFor(n), kThreads, size_t{0}, logits, chosen, d_weights,
                routing, n, experts, d_logits);
}

// --- Permutation -----------------------------------------------------------------------------

// Where the permutation's scratch keeps what: the first assignment whose expert is out of range
// and that expert ({-1, 0} when none), each tile's first such assignment, each expert's first
// row, and per tile and expert the count (then the tile's first row among the expert's).
struct PermuteScratch {
  int64_t* error;
  int64_t* tile_bad;
  int32_t* expert_first;
  int32_t* tile_counts;
};

inline int64_t TilesOf(int64_t assignments) { return (assignments + kThreads - 1) / kThreads; }

inline size_t PermuteScratchBytes(int64_t assignments, int64_t experts) {
  const int64_t tiles = TilesOf(assignments);
  return static_cast<size_t>(2 + tiles) * sizeof(int64_t) +
         static_cast<size_t>(experts + tiles * experts) * sizeof(int32_t);
}

inline PermuteScratch PermuteScratchAt(void* scratch, int64_t assignments, int64_t experts) {
  auto* wide = static_cast<int64_t*>(scratch);
  auto* narrow = reinterpret_cast<int32_t*>(wide + 2 + TilesOf(assignments));
  return {wide, wide + 2, narrow, narrow + experts};
}

// Block b: the experts' counts among assignments [b kThreads, (b + 1) kThreads), and the tile's
// first assignment of an expert outside [0, experts) (-1: none).
__global__ void TileCountsKernel(const int32_t* ids, int64_t assignments, int64_t experts,
                                 PermuteScratch scratch) {
  __shared__ int32_t tile[kThreads];
  const int64_t first = blockIdx.x * static_cast<int64_t>(kThreads);
  const int64_t size = min(assignments - first, static_cast<int64_t>(kThreads));
  if (threadIdx.x < size) tile[threadIdx.x] = ids[first + threadIdx.x];
  __syncthreads();
  for (int64_t e = threadIdx.x; e < experts; e += kThreads) {
    int32_t count = 0;
    for (int64_t i = 0; i < size; ++i) count += tile[i] == e;
    scratch.tile_counts[blockIdx.x * experts + e] = count;
  }
  if (threadIdx.x == 0) {
    int64_t bad = -1;
    for (int64_t i = 0; i < size && bad < 0; ++i) {
      if (tile[i] < 0 || tile[i] >= experts) bad = first + i;
    }
    scratch.tile_bad[blockIdx.x] = bad;
  }
}

// One block: each expert's count, each tile's first row among the expert's (the counts of the
// tiles before it, in place), each expert's first row, and the first bad assignment.
__global__ void OffsetsKernel(const int32_t* ids, int64_t tiles, int64_t experts, int32_t* counts,
                              PermuteScratch scratch) {
  for (int64_t e = threadIdx.x; e < experts; e += kThreads) {
    int32_t running = 0;
    for (int64_t b = 0; b < tiles; ++b) {
      const int32_t count = scratch.tile_counts[b * experts + e];
      scratch.tile_counts[b * experts + e] = running;
      running += count;
    }
    counts[e] = running;
  }
  __syncthreads();  // the counts are all written
  if (threadIdx.x != 0) return;
  int32_t row = 0;
  for (int64_t e = 0; e < experts; ++e) {
    scratch.expert_first[e] = row;
    row += counts[e];
  }
  int64_t bad = -1;
  for (int64_t b = 0; b < tiles && bad < 0; ++b) bad = scratch.tile_bad[b];
  scratch.error[0] = bad;
  scratch.error[1] = bad >= 0 ? ids[bad] : 0;
}

// Block b: each of its assignments' slot: its expert's first row, plus the tile's first row among
// that expert's, plus the assignments of that expert before it in the tile.
__global__ void SlotsKernel(const int32_t* ids, int64_t assignments, int64_t experts,
                            PermuteScratch scratch, int32_t* slots) {
  __shared__ int32_t tile[kThreads];
  const int64_t first = blockIdx.x * static_cast<int64_t>(kThreads);
  const int64_t i = first + threadIdx.x;
  if (i < assignments) tile[threadIdx.x] = ids[i];
  __syncthreads();
  if (i >= assignments) return;
  const int32_t e = tile[threadIdx.x];
  if (e < 0 || e >= experts) return;  // reported by OffsetsKernel
  int32_t rank = 0;
  for (int x = 0; x < static_cast<int>(threadIdx.x); ++x) rank += tile[x] == e;
  slots[i] = scratch.expert_first[e] + scratch.tile_counts[blockIdx.x * experts + e] + rank;
}

// scratch holds PermuteScratchBytes; its first two int64 are then the first bad assignment and
// its expert ({-1, 0}: none).
template <typename Launch>
cudaError_t RunPermute(Launch&& launch, const int32_t* ids, int64_t assignments, int64_t experts,
                       int32_t* counts, int32_t* slots, void* scratch) {
  const PermuteScratch at = PermuteScratchAt(scratch, assignments, experts);
  const int64_t tiles = TilesOf(assignments);
  cudaError_t error =
      launch(TileCountsKernel, tiles, kThreads, size_t{0}, ids, assignments, experts, at);
  if (error != cudaSuccess) return error;
  error = launch(OffsetsKernel, 1, kThreads, size_t{0}, ids, tiles, experts, counts, at);
  if (error != cudaSuccess) return error;
  return launch(SlotsKernel, tiles, kThreads, size_t{0}, ids, assignments, experts, at, slots);
}

// --- Dispatch and combine --------------------------------------------------------------------

// out[slots[a]] = x[a / k], element (a, c) per thread; T is f32 or bf16's bits.
template <typename T>
__global__ void DispatchKernel(const T* x, const int32_t* slots, T* out, int64_t assignments,
                               int64_t k, int64_t d) {
  TITAN_GRID_STRIDE(i, assignments * d) {
    const int64_t a = i / d, c = i % d, row = slots[a];
    if (row < 0 || row >= assignments) continue;
    out[row * d + c] = x[(a / k) * d + c];
  }
}

// dx[t, c] += d_out[slots[t k], c] + ... + d_out[slots[t k + k - 1], c], summed from zero.
__global__ void DispatchBackwardKernel(const float* d_out, const int32_t* slots, float* dx,
                                       int64_t n, int64_t k, int64_t d) {
  TITAN_GRID_STRIDE(i, n * d) {
    const int64_t t = i / d, c = i % d;
    float sum = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t row = slots[t * k + j];
      if (row >= 0 && row < n * k) sum += d_out[row * d + c];
    }
    dx[i] += sum;
  }
}

// out[t, c] += w[t, 0] y[slots[t k], c] + ..., each product and sum rounded in turn.
__global__ void CombineKernel(const float* y, const float* weights, const int32_t* slots,
                              float* out, int64_t n, int64_t k, int64_t d) {
  TITAN_GRID_STRIDE(i, n * d) {
    const int64_t t = i / d, c = i % d;
    float sum = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t row = slots[t * k + j];
      if (row >= 0 && row < n * k)
        sum = __fadd_rn(sum, __fmul_rn(weights[t * k + j], y[row * d + c]));
    }
    out[i] += sum;
  }
}

// d_y[slots[a], c] = weights[a] d_out[a / k, c].
__global__ void CombineBackwardRowsKernel(const float* d_out, const float* weights,
                                          const int32_t* slots, float* d_y, int64_t assignments,
                                          int64_t k, int64_t d) {
  TITAN_GRID_STRIDE(i, assignments * d) {
    const int64_t a = i / d, c = i % d, row = slots[a];
    if (row < 0 || row >= assignments) continue;
    d_y[row * d + c] = __fmul_rn(weights[a], d_out[(a / k) * d + c]);
  }
}

constexpr int kWarpsPerBlock = kThreads / 32;

// Warp a: d_weights[a] = dot(d_out[a / k], y[slots[a]]), lane l summing the features c = l mod 32
// in order, then the warp's butterfly.
__global__ void CombineBackwardWeightsKernel(const float* d_out, const float* y,
                                             const int32_t* slots, float* d_weights,
                                             int64_t assignments, int64_t k, int64_t d) {
  const int64_t a = blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + threadIdx.x / 32;
  if (a >= assignments) return;  // the whole warp
  const int64_t row = slots[a];
  const bool valid = row >= 0 && row < assignments;
  const float* g = d_out + (a / k) * d;
  float partial = 0.0f;
  for (int64_t c = threadIdx.x % 32; valid && c < d; c += 32) {
    partial = __fadd_rn(partial, __fmul_rn(g[c], y[row * d + c]));
  }
  const float total = WarpSum(partial);
  if (threadIdx.x % 32 == 0) d_weights[a] = total;
}

template <typename Launch>
cudaError_t RunDispatch(Launch&& launch, const void* x, bool bf16, const int32_t* slots, void* out,
                        int64_t n, int64_t assignments, int64_t d) {
  if (assignments * d == 0) return cudaSuccess;
  const int64_t k = assignments / n;
  if (bf16) {
    return launch(DispatchKernel<uint16_t>, BlocksFor(assignments * d), kThreads, size_t{0},
                  static_cast<const uint16_t*>(x), slots, static_cast<uint16_t*>(out), assignments,
                  k, d);
  }
  return launch(DispatchKernel<float>, BlocksFor(assignments * d), kThreads, size_t{0},
                static_cast<const float*>(x), slots, static_cast<float*>(out), assignments, k, d);
}

template <typename Launch>
cudaError_t RunDispatchBackward(Launch&& launch, const float* d_out, const int32_t* slots,
                                float* dx, int64_t n, int64_t assignments, int64_t d) {
  if (assignments * d == 0) return cudaSuccess;
  return launch(DispatchBackwardKernel, BlocksFor(n * d), kThreads, size_t{0}, d_out, slots, dx, n,
                assignments / n, d);
}

template <typename Launch>
cudaError_t RunCombine(Launch&& launch, const float* y, const float* weights, const int32_t* slots,
                       float* out, int64_t n, int64_t assignments, int64_t d) {
  if (assignments * d == 0) return cudaSuccess;
  return launch(CombineKernel, BlocksFor(n * d), kThreads, size_t{0}, y, weights, slots, out, n,
                assignments / n, d);
}

template <typename Launch>
cudaError_t RunCombineBackward(Launch&& launch, const float* d_out, const float* y,
                               const float* weights, const int32_t* slots, float* d_y,
                               float* d_weights, int64_t n, int64_t assignments, int64_t d) {
  if (assignments == 0) return cudaSuccess;
  const int64_t k = assignments / n;
  if (d > 0) {
    const cudaError_t error =
        launch(CombineBackwardRowsKernel, BlocksFor(assignments * d), kThreads, size_t{0}, d_out,
               weights, slots, d_y, assignments, k, d);
    if (error != cudaSuccess) return error;
  }
  return launch(CombineBackwardWeightsKernel, (assignments + kWarpsPerBlock - 1) / kWarpsPerBlock,
                kThreads, size_t{0}, d_out, y, slots, d_weights, assignments, k, d);
}

}  // namespace titan::cuda::moe

#endif  // TITAN_PLUGINS_DEVICE_CUDA_MOE_KERNELS_CUH_
