#include "core/tensor/attention_bf16.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <mutex>
#include <vector>

#include "core/tensor/bf16_gemm.h"
#include "core/tensor/internal/attention_layout.h"
#include "core/tensor/vector_kernels.h"
#include "titan/float16.h"

namespace titan {
namespace {

using Layout = internal::AttentionLayout;

// Query rows per tile, as in the f32 kernel: each tile's scores are [kQueryTile, visible keys].
constexpr int64_t kQueryTile = 32;

// x [b, len, heads, hd] rounded to bf16 as [b, heads, len, hd], so that each head's rows are one
// contiguous matrix, which Bf16Gemm takes: rounded in one vector pass, then moved row by row. Each
// operand is rounded once here rather than once per tile that reads it: the same numbers.
std::vector<uint16_t> HeadMajorBf16(const float* x, int64_t batch, int64_t len, int64_t heads,
                                    int64_t hd) {
  const int64_t n = batch * len * heads * hd;
  std::vector<uint16_t> rounded(n), packed(n);
  VectorCastF32ToBf16(x, rounded.data(), n);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < len; ++i) {
      for (int64_t h = 0; h < heads; ++h) {
        std::memcpy(packed.data() + ((b * heads + h) * len + i) * hd,
                    rounded.data() + ((b * len + i) * heads + h) * hd, hd * sizeof(uint16_t));
      }
    }
  }
  return packed;
}

// One head's rows of a HeadMajorBf16 copy, from row `first` on.
const uint16_t* HeadRows(const std::vector<uint16_t>& packed, int64_t len, int64_t heads,
                         int64_t hd, int64_t b, int64_t head, int64_t first) {
  return packed.data() + ((b * heads + head) * len + first) * hd;
}

// A row's scores less `shift` where the query sees the key, -inf (probability 0) elsewhere; then
// one VectorExp (Highway's, vector_kernels.h) takes the whole tile, in the forward and the
// backward alike.
void Shift(float* row, float shift, int64_t visible, int64_t keys) {
  if (visible == 0) shift = 0;  // lse is -inf there: every column is masked anyway
#pragma omp simd
  for (int64_t j = 0; j < visible; ++j) row[j] -= shift;
  std::fill(row + visible, row + keys, -std::numeric_limits<float>::infinity());
}

float Max(const float* row, int64_t n) {
  float max = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : max)
  for (int64_t j = 0; j < n; ++j) max = std::max(max, row[j]);
  return max;
}

float Sum(const float* row, int64_t n) {
  float sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) sum += row[j];
  return sum;
}

// The first error of any thread; the tasks after it are skipped.
class FirstError {
 public:
  bool Record(const absl::Status& status) {
    if (status.ok()) return true;
    std::lock_guard<std::mutex> lock(mutex_);
    if (status_.ok()) status_ = status;
    failed_ = true;
    return false;
  }
  bool failed() const { return failed_; }
  absl::Status status() const { return status_; }

 private:
  std::mutex mutex_;
  absl::Status status_;
  std::atomic<bool> failed_{false};
};

}  // namespace

// Per query tile, as the f32 kernel: scores = scale q k^T, an exact f32 softmax of each row,
// out = p v; the GEMMs take bf16 operands.
absl::Status AttentionForwardBf16(float* out, float* lse, const float* q, const float* k,
                                  const float* v, const AttentionShape& shape,
                                  Bf16GemmFunction gemm) {
  if (gemm == nullptr) gemm = Bf16Gemm;
  const int64_t t = shape.seq_len, hd = shape.head_dim, group = shape.heads / shape.kv_heads;
  const int64_t all_keys = shape.keys();
  const Layout at{shape};
  const float scale = internal::AttentionScale<float>(shape);
  const std::vector<uint16_t> q16 = HeadMajorBf16(q, shape.batch, t, shape.heads, hd);
  const std::vector<uint16_t> k16 = HeadMajorBf16(k, shape.batch, all_keys, shape.kv_heads, hd);
  const std::vector<uint16_t> v16 = HeadMajorBf16(v, shape.batch, all_keys, shape.kv_heads, hd);
  const int64_t tiles = (t + kQueryTile - 1) / kQueryTile;
  const int64_t tasks = shape.batch * shape.heads * tiles;
  FirstError error;
#pragma omp parallel if (tasks >= omp_get_max_threads())
  {
    std::vector<float> scores(kQueryTile * all_keys), tile_out(kQueryTile * hd);
    std::vector<float> row_max(kQueryTile), inverse_sum(kQueryTile);
    std::vector<uint16_t> p16(kQueryTile * all_keys);
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < tasks; ++task) {
      if (error.failed()) continue;
      // Longest tiles (latest queries) first, so the dynamic schedule ends evenly.
      const int64_t tile = tiles - 1 - task % tiles, bh = task / tiles;
      const int64_t b = bh / shape.heads, h = bh % shape.heads;
      const int64_t i0 = tile * kQueryTile, rows = std::min(kQueryTile, t - i0);
      const int64_t keys = shape.visible(i0 + rows - 1);
      float* o = out + at.q(b, i0, h);
      if (keys == 0) {  // no query of the tile sees a key
        for (int64_t r = 0; r < rows; ++r) {
          std::fill(o + r * at.q_stride(), o + r * at.q_stride() + hd, 0.0f);
          lse[at.lse(b, h, i0 + r)] = -std::numeric_limits<float>::infinity();
        }
        continue;
      }
      const uint16_t* qt = HeadRows(q16, t, shape.heads, hd, b, h, i0);
      const uint16_t* k0 = HeadRows(k16, all_keys, shape.kv_heads, hd, b, h / group, 0);
      const uint16_t* v0 = HeadRows(v16, all_keys, shape.kv_heads, hd, b, h / group, 0);
      if (!error.Record(gemm(false, true, rows, keys, hd, scale, qt, k0, 0.0f, scores.data()))) {
        continue;
      }
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t visible = shape.visible(i0 + r);
        row_max[r] = Max(scores.data() + r * keys, visible);
        Shift(scores.data() + r * keys, row_max[r], visible, keys);
      }
      VectorExp(scores.data(), scores.data(), rows * keys);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t visible = shape.visible(i0 + r);
        if (visible == 0) {
          inverse_sum[r] = 0;
          lse[at.lse(b, h, i0 + r)] = -std::numeric_limits<float>::infinity();
          continue;
        }
        const float sum = Sum(scores.data() + r * keys, visible);
        lse[at.lse(b, h, i0 + r)] = row_max[r] + std::log(sum);
        inverse_sum[r] = 1.0f / sum;
      }
      VectorCastF32ToBf16(scores.data(), p16.data(), rows * keys);
      if (!error.Record(
              gemm(false, false, rows, hd, keys, 1.0f, p16.data(), v0, 0.0f, tile_out.data()))) {
        continue;
      }
      for (int64_t r = 0; r < rows; ++r) {
#pragma omp simd
        for (int64_t d = 0; d < hd; ++d) {
          o[r * at.q_stride() + d] = tile_out[r * hd + d] * inverse_sum[r];
        }
      }
    }
  }
  return error.status();
}

// Per query tile, as the f32 kernel, with p recomputed from lse and D_i = dout_i . out_i:
// dp = dout v^T; ds = p (dp - D); dq += scale ds k; dk += scale ds^T q; dv += p^T dout. A task's
// dk and dv sum in its own f32 buffers (Bf16Gemm writes contiguous rows) and are added at its end.
absl::Status AttentionBackwardBf16(float* dq, float* dk, float* dv, const float* dout,
                                   const float* q, const float* k, const float* v, const float* out,
                                   const float* lse, const AttentionShape& shape,
                                   Bf16GemmFunction gemm) {
  if (gemm == nullptr) gemm = Bf16Gemm;
  const int64_t t = shape.seq_len, hd = shape.head_dim, group = shape.heads / shape.kv_heads;
  const int64_t all_keys = shape.keys();
  const Layout at{shape};
  const float scale = internal::AttentionScale<float>(shape);
  const std::vector<uint16_t> q16 = HeadMajorBf16(q, shape.batch, t, shape.heads, hd);
  const std::vector<uint16_t> dout16 = HeadMajorBf16(dout, shape.batch, t, shape.heads, hd);
  const std::vector<uint16_t> k16 = HeadMajorBf16(k, shape.batch, all_keys, shape.kv_heads, hd);
  const std::vector<uint16_t> v16 = HeadMajorBf16(v, shape.batch, all_keys, shape.kv_heads, hd);
  const int64_t seen = t > 0 ? shape.visible(t - 1) : 0;  // keys any query sees
  const int64_t tasks = shape.batch * shape.kv_heads;
  FirstError error;
#pragma omp parallel if (tasks >= omp_get_max_threads())
  {
    std::vector<float> p(kQueryTile * all_keys), dp(kQueryTile * all_keys);
    std::vector<float> tile_dq(kQueryTile * hd), task_dk(seen * hd), task_dv(seen * hd);
    std::vector<uint16_t> p16(kQueryTile * all_keys), ds16(kQueryTile * all_keys);
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < tasks; ++task) {
      if (error.failed()) continue;
      const int64_t b = task / shape.kv_heads, kvh = task % shape.kv_heads;
      const uint16_t* k0 = HeadRows(k16, all_keys, shape.kv_heads, hd, b, kvh, 0);
      const uint16_t* v0 = HeadRows(v16, all_keys, shape.kv_heads, hd, b, kvh, 0);
      std::fill(task_dk.begin(), task_dk.end(), 0.0f);
      std::fill(task_dv.begin(), task_dv.end(), 0.0f);
      for (int64_t h = kvh * group; h < (kvh + 1) * group && !error.failed(); ++h) {
        for (int64_t i0 = 0; i0 < t && !error.failed(); i0 += kQueryTile) {
          const int64_t rows = std::min(kQueryTile, t - i0);
          const int64_t keys = shape.visible(i0 + rows - 1);
          if (keys == 0) continue;  // these queries see no key: no gradient flows
          const uint16_t* qt = HeadRows(q16, t, shape.heads, hd, b, h, i0);
          const uint16_t* dot = HeadRows(dout16, t, shape.heads, hd, b, h, i0);
          if (!error.Record(gemm(false, true, rows, keys, hd, scale, qt, k0, 0.0f, p.data())) ||
              !error.Record(gemm(false, true, rows, keys, hd, 1.0f, dot, v0, 0.0f, dp.data()))) {
            break;
          }
          for (int64_t r = 0; r < rows; ++r) {
            Shift(p.data() + r * keys, lse[at.lse(b, h, i0 + r)], shape.visible(i0 + r), keys);
          }
          VectorExp(p.data(), p.data(), rows * keys);
          for (int64_t r = 0; r < rows; ++r) {
            const float* o = out + at.q(b, i0 + r, h);
            float di = 0;
#pragma omp simd reduction(+ : di)
            for (int64_t c = 0; c < hd; ++c) di += Bf16ToF32(dot[r * hd + c]) * o[c];
            const float* pr = p.data() + r * keys;
            float* dpr = dp.data() + r * keys;
#pragma omp simd
            for (int64_t j = 0; j < keys; ++j) dpr[j] = pr[j] * (dpr[j] - di);  // now ds
          }
          VectorCastF32ToBf16(p.data(), p16.data(), rows * keys);
          VectorCastF32ToBf16(dp.data(), ds16.data(), rows * keys);
          if (!error.Record(gemm(false, false, rows, hd, keys, scale, ds16.data(), k0, 0.0f,
                                 tile_dq.data())) ||
              !error.Record(gemm(true, false, keys, hd, rows, scale, ds16.data(), qt, 1.0f,
                                 task_dk.data())) ||
              !error.Record(
                  gemm(true, false, keys, hd, rows, 1.0f, p16.data(), dot, 1.0f, task_dv.data()))) {
            break;
          }
          for (int64_t r = 0; r < rows; ++r) {
            float* row = dq + at.q(b, i0 + r, h);
            const float* add = tile_dq.data() + r * hd;
#pragma omp simd
            for (int64_t d = 0; d < hd; ++d) row[d] += add[d];
          }
        }
      }
      if (error.failed()) continue;
      for (int64_t j = 0; j < seen; ++j) {
        float* dk_row = dk + at.kv(b, j, kvh);
        float* dv_row = dv + at.kv(b, j, kvh);
        const float* dk_add = task_dk.data() + j * hd;
        const float* dv_add = task_dv.data() + j * hd;
#pragma omp simd
        for (int64_t d = 0; d < hd; ++d) {
          dk_row[d] += dk_add[d];
          dv_row[d] += dv_add[d];
        }
      }
    }
  }
  return error.status();
}

}  // namespace titan
