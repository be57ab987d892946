#include "core/tensor/attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/tensor/internal/attention_layout.h"
#include "core/tensor/internal/gemm.h"

namespace titan {
namespace {

using internal::Gemm;

// Query rows per tile: each tile's scores are [kQueryTile, keys up to the tile's last row].
constexpr int64_t kQueryTile = 32;

using Layout = internal::AttentionLayout;

}  // namespace

// Per query tile: scores = scale q k^T (one gemm over every visible key), an exact softmax of
// each row, out = p v (a second gemm). Scores take [kQueryTile, t] per thread, never [t, t].
template <typename T>
void AttentionForward(T* out, T* lse, const T* q, const T* k, const T* v,
                      const AttentionShape& shape) {
  const int64_t t = shape.seq_len, hd = shape.head_dim, group = shape.heads / shape.kv_heads;
  const Layout at{shape};
  const int64_t tiles = (t + kQueryTile - 1) / kQueryTile;
  const int64_t tasks = shape.batch * shape.heads * tiles;
  // With fewer tasks than threads, run them in turn and let BLAS use the threads instead.
#pragma omp parallel if (tasks >= omp_get_max_threads())
  {
    std::vector<T> scores(kQueryTile * shape.keys()), inverse_sum(kQueryTile);
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < tasks; ++task) {
      // Longest tiles (latest queries) first, so the dynamic schedule ends evenly.
      const int64_t tile = tiles - 1 - task % tiles, bh = task / tiles;
      const int64_t b = bh / shape.heads, h = bh % shape.heads;
      const int64_t i0 = tile * kQueryTile, rows = std::min(kQueryTile, t - i0);
      const int64_t keys = shape.visible(i0 + rows - 1);
      T* o = out + at.q(b, i0, h);
      if (keys == 0) {  // no query of the tile sees a key
        for (int64_t r = 0; r < rows; ++r) {
          std::fill(o + r * at.q_stride(), o + r * at.q_stride() + hd, T{0});
          lse[at.lse(b, h, i0 + r)] = -std::numeric_limits<T>::infinity();
        }
        continue;
      }
      Gemm(CblasNoTrans, CblasTrans, rows, keys, hd, internal::AttentionScale<T>(shape),
           q + at.q(b, i0, h), at.q_stride(), k + at.kv(b, 0, h / group), at.kv_stride(), T{0},
           scores.data(), keys);
      for (int64_t r = 0; r < rows; ++r) {
        T* row = scores.data() + r * keys;
        const int64_t visible = shape.visible(i0 + r);
        if (visible == 0) {
          std::fill(row, row + keys, T{0});
          inverse_sum[r] = 0;
          lse[at.lse(b, h, i0 + r)] = -std::numeric_limits<T>::infinity();
          continue;
        }
        const T max = *std::max_element(row, row + visible);
        internal::MaskedExp(row, max, visible, keys);
        T sum = 0;
        for (int64_t j = 0; j < visible; ++j) sum += row[j];
        inverse_sum[r] = T{1} / sum;
        lse[at.lse(b, h, i0 + r)] = max + std::log(sum);
      }
      Gemm(CblasNoTrans, CblasNoTrans, rows, hd, keys, T{1}, scores.data(), keys,
           v + at.kv(b, 0, h / group), at.kv_stride(), T{0}, o, at.q_stride());
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t d = 0; d < hd; ++d) o[r * at.q_stride() + d] *= inverse_sum[r];
      }
    }
  }
}

// Per query tile, with p recomputed from lse and D_i = dout_i . out_i:
// dp = dout v^T; ds = p (dp - D); dq += scale ds k; dk += scale ds^T q; dv += p^T dout.
// One task owns a batch row and kv head (every query head reading it), so its dk and dv sums
// are its own: race-free, and the same for any thread count.
template <typename T>
void AttentionBackward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v,
                       const T* out, const T* lse, const AttentionShape& shape) {
  const int64_t t = shape.seq_len, hd = shape.head_dim, group = shape.heads / shape.kv_heads;
  const Layout at{shape};
  const T scale = internal::AttentionScale<T>(shape);
  const int64_t tasks = shape.batch * shape.kv_heads;
#pragma omp parallel if (tasks >= omp_get_max_threads())
  {
    std::vector<T> p(kQueryTile * shape.keys()), dp(kQueryTile * shape.keys());
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t b = task / shape.kv_heads, kvh = task % shape.kv_heads;
      const T* k0 = k + at.kv(b, 0, kvh);
      const T* v0 = v + at.kv(b, 0, kvh);
      for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
        for (int64_t i0 = 0; i0 < t; i0 += kQueryTile) {
          const int64_t rows = std::min(kQueryTile, t - i0);
          const int64_t keys = shape.visible(i0 + rows - 1);
          if (keys == 0) continue;  // these queries see no key: no gradient flows
          const T* qt = q + at.q(b, i0, h);
          const T* dot = dout + at.q(b, i0, h);
          Gemm(CblasNoTrans, CblasTrans, rows, keys, hd, scale, qt, at.q_stride(), k0,
               at.kv_stride(), T{0}, p.data(), keys);
          Gemm(CblasNoTrans, CblasTrans, rows, keys, hd, T{1}, dot, at.q_stride(), v0,
               at.kv_stride(), T{0}, dp.data(), keys);
          for (int64_t r = 0; r < rows; ++r) {
            const T* o = out + at.q(b, i0 + r, h);
            T di = 0;
            for (int64_t c = 0; c < hd; ++c) di += dot[r * at.q_stride() + c] * o[c];
            T* pr = p.data() + r * keys;
            T* dpr = dp.data() + r * keys;
            internal::MaskedExp(pr, lse[at.lse(b, h, i0 + r)], shape.visible(i0 + r), keys);
#pragma omp simd
            for (int64_t j = 0; j < keys; ++j) dpr[j] = pr[j] * (dpr[j] - di);  // now ds
          }
          Gemm(CblasNoTrans, CblasNoTrans, rows, hd, keys, scale, dp.data(), keys, k0,
               at.kv_stride(), T{1}, dq + at.q(b, i0, h), at.q_stride());
          Gemm(CblasTrans, CblasNoTrans, keys, hd, rows, scale, dp.data(), keys, qt, at.q_stride(),
               T{1}, dk + at.kv(b, 0, kvh), at.kv_stride());
          Gemm(CblasTrans, CblasNoTrans, keys, hd, rows, T{1}, p.data(), keys, dot, at.q_stride(),
               T{1}, dv + at.kv(b, 0, kvh), at.kv_stride());
        }
      }
    }
  }
}

template void AttentionForward(float*, float*, const float*, const float*, const float*,
                               const AttentionShape&);
template void AttentionForward(double*, double*, const double*, const double*, const double*,
                               const AttentionShape&);
template void AttentionBackward(float*, float*, float*, const float*, const float*, const float*,
                                const float*, const float*, const float*, const AttentionShape&);
template void AttentionBackward(double*, double*, double*, const double*, const double*,
                                const double*, const double*, const double*, const double*,
                                const AttentionShape&);

}  // namespace titan
