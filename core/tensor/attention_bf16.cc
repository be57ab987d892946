#include "core/tensor/attention_bf16.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <mutex>
#include <vector>

#include "core/tensor/bf16_gemm.h"
#include "core/tensor/internal/attention_layout.h"
#include "titan/float16.h"

namespace titan {
namespace {

using Layout = internal::AttentionLayout;

// Query rows per tile, as in the f32 kernel: each tile's scores are [kQueryTile, visible keys].
constexpr int64_t kQueryTile = 32;

// x [b, len, heads, hd] rounded to bf16 as [b, heads, len, hd], so that each head's rows are one
// contiguous matrix, which Bf16Gemm takes. Keys and values are rounded once here rather than once
// per query tile: the same numbers, for a copy half the size of k and v.
std::vector<uint16_t> HeadMajorBf16(const float* x, int64_t batch, int64_t len, int64_t heads,
                                    int64_t hd) {
  std::vector<uint16_t> packed(batch * len * heads * hd);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < len; ++i) {
      for (int64_t h = 0; h < heads; ++h) {
        const float* from = x + ((b * len + i) * heads + h) * hd;
        uint16_t* to = packed.data() + ((b * heads + h) * len + i) * hd;
#pragma omp simd
        for (int64_t d = 0; d < hd; ++d) to[d] = F32ToBf16(from[d]);
      }
    }
  }
  return packed;
}

// `rows` rows of hd values, `stride` apart, rounded into the contiguous [rows, hd] `to`.
void RoundRows(const float* from, int64_t stride, int64_t rows, int64_t hd, uint16_t* to) {
  for (int64_t r = 0; r < rows; ++r) {
#pragma omp simd
    for (int64_t d = 0; d < hd; ++d) to[r * hd + d] = F32ToBf16(from[r * stride + d]);
  }
}

void RoundRow(const float* from, int64_t n, uint16_t* to) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) to[j] = F32ToBf16(from[j]);
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

// One kv head's rows of a HeadMajorBf16 copy.
const uint16_t* KvHead(const std::vector<uint16_t>& packed, const AttentionShape& s, int64_t b,
                       int64_t kv_head) {
  return packed.data() + (b * s.kv_heads + kv_head) * s.keys() * s.head_dim;
}

}  // namespace

// Per query tile, as the f32 kernel: scores = scale q k^T, an exact f32 softmax of each row,
// out = p v; the GEMMs take bf16 operands.
absl::Status AttentionForwardBf16(float* out, float* lse, const float* q, const float* k,
                                  const float* v, const AttentionShape& shape,
                                  Bf16GemmFunction gemm) {
  if (gemm == nullptr) gemm = Bf16Gemm;
  const int64_t t = shape.seq_len, hd = shape.head_dim, group = shape.heads / shape.kv_heads;
  const Layout at{shape};
  const float scale = internal::AttentionScale<float>(shape);
  const std::vector<uint16_t> k16 = HeadMajorBf16(k, shape.batch, shape.keys(), shape.kv_heads, hd);
  const std::vector<uint16_t> v16 = HeadMajorBf16(v, shape.batch, shape.keys(), shape.kv_heads, hd);
  const int64_t tiles = (t + kQueryTile - 1) / kQueryTile;
  const int64_t tasks = shape.batch * shape.heads * tiles;
  FirstError error;
#pragma omp parallel if (tasks >= omp_get_max_threads())
  {
    std::vector<float> scores(kQueryTile * shape.keys()), tile_out(kQueryTile * hd);
    std::vector<float> inverse_sum(kQueryTile);
    std::vector<uint16_t> q16(kQueryTile * hd), p16(kQueryTile * shape.keys());
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
      RoundRows(q + at.q(b, i0, h), at.q_stride(), rows, hd, q16.data());
      if (!error.Record(gemm(false, true, rows, keys, hd, scale, q16.data(),
                             KvHead(k16, shape, b, h / group), 0.0f, scores.data()))) {
        continue;
      }
      for (int64_t r = 0; r < rows; ++r) {
        float* row = scores.data() + r * keys;
        const int64_t visible = shape.visible(i0 + r);
        if (visible == 0) {
          std::fill(row, row + keys, 0.0f);
          inverse_sum[r] = 0;
          lse[at.lse(b, h, i0 + r)] = -std::numeric_limits<float>::infinity();
        } else {
          const float max = *std::max_element(row, row + visible);
          internal::MaskedExp(row, max, visible, keys);
          float sum = 0;
          for (int64_t j = 0; j < visible; ++j) sum += row[j];
          inverse_sum[r] = 1.0f / sum;
          lse[at.lse(b, h, i0 + r)] = max + std::log(sum);
        }
        RoundRow(row, keys, p16.data() + r * keys);
      }
      if (!error.Record(gemm(false, false, rows, hd, keys, 1.0f, p16.data(),
                             KvHead(v16, shape, b, h / group), 0.0f, tile_out.data()))) {
        continue;
      }
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t d = 0; d < hd; ++d) o[r * at.q_stride() + d] = tile_out[r * hd + d] * inverse_sum[r];
      }
    }
  }
  return error.status();
}

// Per query tile, as the f32 kernel, with p recomputed from lse and D_i = dout_i . out_i:
// dp = dout v^T; ds = p (dp - D); dq += scale ds k; dk += scale ds^T q; dv += p^T dout. A task's
// dk and dv sum in its own f32 buffers (Bf16Gemm writes contiguous rows) and are added at its end.
absl::Status AttentionBackwardBf16(float* dq, float* dk, float* dv, const float* dout,
                                   const float* q, const float* k, const float* v,
                                   const float* out, const float* lse, const AttentionShape& shape,
                                   Bf16GemmFunction gemm) {
  if (gemm == nullptr) gemm = Bf16Gemm;
  const int64_t t = shape.seq_len, hd = shape.head_dim, group = shape.heads / shape.kv_heads;
  const int64_t all_keys = shape.keys();
  const Layout at{shape};
  const float scale = internal::AttentionScale<float>(shape);
  const std::vector<uint16_t> k16 = HeadMajorBf16(k, shape.batch, all_keys, shape.kv_heads, hd);
  const std::vector<uint16_t> v16 = HeadMajorBf16(v, shape.batch, all_keys, shape.kv_heads, hd);
  const int64_t seen = t > 0 ? shape.visible(t - 1) : 0;  // keys any query sees
  const int64_t tasks = shape.batch * shape.kv_heads;
  FirstError error;
#pragma omp parallel if (tasks >= omp_get_max_threads())
  {
    std::vector<float> p(kQueryTile * all_keys), dp(kQueryTile * all_keys);
    std::vector<float> tile_dq(kQueryTile * hd), task_dk(seen * hd), task_dv(seen * hd);
    std::vector<uint16_t> q16(kQueryTile * hd), dout16(kQueryTile * hd);
    std::vector<uint16_t> p16(kQueryTile * all_keys), ds16(kQueryTile * all_keys);
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < tasks; ++task) {
      if (error.failed()) continue;
      const int64_t b = task / shape.kv_heads, kvh = task % shape.kv_heads;
      const uint16_t* k0 = KvHead(k16, shape, b, kvh);
      const uint16_t* v0 = KvHead(v16, shape, b, kvh);
      std::fill(task_dk.begin(), task_dk.end(), 0.0f);
      std::fill(task_dv.begin(), task_dv.end(), 0.0f);
      for (int64_t h = kvh * group; h < (kvh + 1) * group && !error.failed(); ++h) {
        for (int64_t i0 = 0; i0 < t && !error.failed(); i0 += kQueryTile) {
          const int64_t rows = std::min(kQueryTile, t - i0);
          const int64_t keys = shape.visible(i0 + rows - 1);
          if (keys == 0) continue;  // these queries see no key: no gradient flows
          RoundRows(q + at.q(b, i0, h), at.q_stride(), rows, hd, q16.data());
          RoundRows(dout + at.q(b, i0, h), at.q_stride(), rows, hd, dout16.data());
          if (!error.Record(gemm(false, true, rows, keys, hd, scale, q16.data(), k0, 0.0f,
                                 p.data())) ||
              !error.Record(gemm(false, true, rows, keys, hd, 1.0f, dout16.data(), v0, 0.0f,
                                 dp.data()))) {
            break;
          }
          for (int64_t r = 0; r < rows; ++r) {
            const float* o = out + at.q(b, i0 + r, h);
            float di = 0;
            for (int64_t c = 0; c < hd; ++c) di += Bf16ToF32(dout16[r * hd + c]) * o[c];
            float* pr = p.data() + r * keys;
            float* dpr = dp.data() + r * keys;
            internal::MaskedExp(pr, lse[at.lse(b, h, i0 + r)], shape.visible(i0 + r), keys);
#pragma omp simd
            for (int64_t j = 0; j < keys; ++j) dpr[j] = pr[j] * (dpr[j] - di);  // now ds
            RoundRow(pr, keys, p16.data() + r * keys);
            RoundRow(dpr, keys, ds16.data() + r * keys);
          }
          if (!error.Record(gemm(false, false, rows, hd, keys, scale, ds16.data(), k0, 0.0f,
                                 tile_dq.data())) ||
              !error.Record(gemm(true, false, keys, hd, rows, scale, ds16.data(), q16.data(), 1.0f,
                                 task_dk.data())) ||
              !error.Record(gemm(true, false, keys, hd, rows, 1.0f, p16.data(), dout16.data(),
                                 1.0f, task_dv.data()))) {
            break;
          }
          for (int64_t r = 0; r < rows; ++r) {
            float* row = dq + at.q(b, i0 + r, h);
            for (int64_t d = 0; d < hd; ++d) row[d] += tile_dq[r * hd + d];
          }
        }
      }
      if (error.failed()) continue;
      for (int64_t j = 0; j < seen; ++j) {
        float* dk_row = dk + at.kv(b, j, kvh);
        float* dv_row = dv + at.kv(b, j, kvh);
        for (int64_t d = 0; d < hd; ++d) {
          dk_row[d] += task_dk[j * hd + d];
          dv_row[d] += task_dv[j * hd + d];
        }
      }
    }
  }
  return error.status();
}

}  // namespace titan
