#include "core/tensor/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace titan {
namespace {

constexpr int64_t kQueryTile = 32;
constexpr int64_t kKeyTile = 64;

template <typename T>
T Dot(const T* a, const T* b, int64_t n) {
  T sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

template <typename T>
void Axpy(T* y, T alpha, const T* x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

int64_t Tiles(int64_t n, int64_t tile) { return (n + tile - 1) / tile; }

// Row pointers into the [b, t, heads, hd] layouts.
struct Rows {
  const AttentionShape& s;
  int64_t q(int64_t b, int64_t i, int64_t h) const {
    return ((b * s.seq_len + i) * s.heads + h) * s.head_dim;
  }
  int64_t kv(int64_t b, int64_t j, int64_t h) const {
    return ((b * s.seq_len + j) * s.kv_heads + h) * s.head_dim;
  }
  int64_t lse(int64_t b, int64_t h, int64_t i) const { return (b * s.heads + h) * s.seq_len + i; }
};

}  // namespace

template <typename T>
void AttentionForward(T* out, T* lse, const T* q, const T* k, const T* v,
                      const AttentionShape& shape) {
  const int64_t batch = shape.batch, t = shape.seq_len, heads = shape.heads;
  const int64_t kv_heads = shape.kv_heads, hd = shape.head_dim;
  const int64_t group = heads / kv_heads;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(hd)));
  const Rows rows{shape};
  const int64_t query_tiles = Tiles(t, kQueryTile);
#pragma omp parallel
  {
    std::vector<T> acc(kQueryTile * hd), row_max(kQueryTile), row_sum(kQueryTile), s(kKeyTile);
#pragma omp for collapse(3) schedule(dynamic)
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t tile = 0; tile < query_tiles; ++tile) {
          const int64_t i0 = tile * kQueryTile, i1 = std::min(t, i0 + kQueryTile);
          std::fill(acc.begin(), acc.end(), T{0});
          std::fill(row_max.begin(), row_max.end(), -std::numeric_limits<T>::infinity());
          std::fill(row_sum.begin(), row_sum.end(), T{0});
          for (int64_t j0 = 0; j0 < i1; j0 += kKeyTile) {
            for (int64_t i = std::max(i0, j0); i < i1; ++i) {
              const T* qi = q + rows.q(b, i, h);
              const int64_t j_end = std::min(j0 + kKeyTile, i + 1);
              T tile_max = -std::numeric_limits<T>::infinity();
              for (int64_t j = j0; j < j_end; ++j) {
                s[j - j0] = Dot(qi, k + rows.kv(b, j, h / group), hd) * scale;
                tile_max = std::max(tile_max, s[j - j0]);
              }
              // Online softmax: rescale what was summed under the old maximum.
              const int64_t r = i - i0;
              const T new_max = std::max(row_max[r], tile_max);
              const T correction = std::exp(row_max[r] - new_max);
              T* a = acc.data() + r * hd;
              for (int64_t d = 0; d < hd; ++d) a[d] *= correction;
              row_sum[r] *= correction;
              for (int64_t j = j0; j < j_end; ++j) {
                const T p = std::exp(s[j - j0] - new_max);
                row_sum[r] += p;
                Axpy(a, p, v + rows.kv(b, j, h / group), hd);
              }
              row_max[r] = new_max;
            }
          }
          for (int64_t i = i0; i < i1; ++i) {
            const int64_t r = i - i0;
            T* o = out + rows.q(b, i, h);
            for (int64_t d = 0; d < hd; ++d) o[d] = acc[r * hd + d] / row_sum[r];
            lse[rows.lse(b, h, i)] = row_max[r] + std::log(row_sum[r]);
          }
        }
      }
    }
  }
}

// With p = softmax probabilities and D_i = dout_i . out_i:
// ds_ij = p_ij (dout_i . v_j - D_i); dq_i += scale ds_ij k_j; dk_j += scale ds_ij q_i;
// dv_j += p_ij dout_i.
template <typename T>
void AttentionBackward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v,
                       const T* out, const T* lse, const AttentionShape& shape) {
  const int64_t batch = shape.batch, t = shape.seq_len, heads = shape.heads;
  const int64_t kv_heads = shape.kv_heads, hd = shape.head_dim;
  const int64_t group = heads / kv_heads;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(hd)));
  const Rows rows{shape};
  const int64_t query_tiles = Tiles(t, kQueryTile), key_tiles = Tiles(t, kKeyTile);
#pragma omp parallel for collapse(3) schedule(dynamic)
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t tile = 0; tile < query_tiles; ++tile) {
        const int64_t i0 = tile * kQueryTile, i1 = std::min(t, i0 + kQueryTile);
        for (int64_t j0 = 0; j0 < i1; j0 += kKeyTile) {
          for (int64_t i = std::max(i0, j0); i < i1; ++i) {
            const T* qi = q + rows.q(b, i, h);
            const T* doi = dout + rows.q(b, i, h);
            const T di = Dot(doi, out + rows.q(b, i, h), hd);
            const T li = lse[rows.lse(b, h, i)];
            T* dqi = dq + rows.q(b, i, h);
            for (int64_t j = j0; j < std::min(j0 + kKeyTile, i + 1); ++j) {
              const int64_t kv_row = rows.kv(b, j, h / group);
              const T p = std::exp(Dot(qi, k + kv_row, hd) * scale - li);
              const T ds = p * (Dot(doi, v + kv_row, hd) - di);
              Axpy(dqi, ds * scale, k + kv_row, hd);
            }
          }
        }
      }
    }
  }
#pragma omp parallel for collapse(3) schedule(dynamic)
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t kvh = 0; kvh < kv_heads; ++kvh) {
      for (int64_t tile = 0; tile < key_tiles; ++tile) {
        const int64_t j0 = tile * kKeyTile, j1 = std::min(t, j0 + kKeyTile);
        for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
          for (int64_t i = j0; i < t; ++i) {
            const T* qi = q + rows.q(b, i, h);
            const T* doi = dout + rows.q(b, i, h);
            const T di = Dot(doi, out + rows.q(b, i, h), hd);
            const T li = lse[rows.lse(b, h, i)];
            for (int64_t j = j0; j < std::min(j1, i + 1); ++j) {
              const int64_t kv_row = rows.kv(b, j, kvh);
              const T p = std::exp(Dot(qi, k + kv_row, hd) * scale - li);
              const T ds = p * (Dot(doi, v + kv_row, hd) - di);
              Axpy(dv + kv_row, p, doi, hd);
              Axpy(dk + kv_row, ds * scale, qi, hd);
            }
          }
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
