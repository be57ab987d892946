#include "core/cpu/cpu_compute.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <iostream>
#include <limits>
#include <random>
#include <vector>

#include "core/tensor/bf16_gemm.h"
#include "titan/float16.h"
#include "titan/float8_cast.h"

namespace titan {
namespace {

TensorView View(float* data, std::vector<int64_t> shape) {
  return TensorView{data, DType::kF32, Device{}, std::move(shape), {}};
}

std::vector<float> Random(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

// c = alpha op(a) op(b) + beta c in double, from row-major a and b as stored.
std::vector<double> Reference(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                              const std::vector<float>& a, const std::vector<float>& b, float beta,
                              const std::vector<float>& c) {
  std::vector<double> out(m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double x = ta ? a[p * m + i] : a[i * k + p];
        const double y = tb ? b[j * k + p] : b[p * n + j];
        sum += x * y;
      }
      out[i * n + j] = alpha * sum + beta * c[i * n + j];
    }
  }
  return out;
}

TEST(CpuCompute, GemmEveryTransposeMatchesTheDefinition) {
  const int64_t m = 7, n = 5, k = 9;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      std::vector<float> a = Random(m * k, 1), b = Random(k * n, 2), c = Random(m * n, 3);
      const std::vector<double> expected = Reference(ta, tb, m, n, k, 0.5f, a, b, 2.0f, c);
      ASSERT_TRUE(
          CpuCompute::Get()
              .Gemm(View(a.data(), ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k}),
                    ta,
                    View(b.data(), tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}),
                    tb, 0.5f, 2.0f, View(c.data(), {m, n}))
              .ok());
      for (int64_t i = 0; i < m * n; ++i) EXPECT_NEAR(c[i], expected[i], 1e-4) << ta << tb << i;
    }
  }
}

// bf16 operands multiply exactly in f32, so both paths (oneDNN where the CPU has bf16
// instructions, the emulation elsewhere) agree with the f64 product of the rounded inputs up to
// f32 summation error.
TEST(CpuCompute, Bf16GemmIsTheProductOfTheRoundedInputs) {
  RecordProperty("bf16_gemm", Bf16GemmPath());
  std::cout << "bf16 GEMM " << Bf16GemmPath() << "\n";
  const int64_t m = 33, n = 17, k = 64;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      std::vector<float> a = Random(m * k, 4), b = Random(k * n, 5), c = Random(m * n, 6);
      std::vector<uint16_t> a16(a.size()), b16(b.size());
      for (size_t i = 0; i < a.size(); ++i) a[i] = Bf16ToF32(a16[i] = F32ToBf16(a[i]));
      for (size_t i = 0; i < b.size(); ++i) b[i] = Bf16ToF32(b16[i] = F32ToBf16(b[i]));
      const std::vector<double> expected = Reference(ta, tb, m, n, k, 1.0f, a, b, 1.0f, c);
      TensorView va{a16.data(),
                    DType::kBF16,
                    Device{},
                    ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k},
                    {}};
      TensorView vb{b16.data(),
                    DType::kBF16,
                    Device{},
                    tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n},
                    {}};
      ASSERT_TRUE(CpuCompute::Get().Gemm(va, ta, vb, tb, 1.0f, 1.0f, View(c.data(), {m, n})).ok())
          << Bf16GemmPath();
      for (int64_t i = 0; i < m * n; ++i) EXPECT_NEAR(c[i], expected[i], 1e-4) << ta << tb << i;
    }
  }
}

// A grouped GEMM of three problems of their own shapes, as a mixture of experts' experts: each
// group's c is the definition's, for every transpose, and leaves the memory between the groups'
// outputs alone.
TEST(CpuCompute, GroupedGemmComputesEveryGroupByTheDefinition) {
  const std::vector<std::array<int64_t, 3>> shapes = {{5, 4, 6}, {1, 4, 6}, {8, 3, 2}};  // m n k
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      std::vector<std::vector<float>> a, b;
      std::vector<float> c = Random(64, 7);
      std::vector<double> expected(c.begin(), c.end());
      std::vector<GemmGroup> groups;
      int64_t at = 0;
      for (size_t g = 0; g < shapes.size(); ++g) {
        const auto [m, n, k] = shapes[g];
        a.push_back(Random(m * k, 10 + g));
        b.push_back(Random(k * n, 20 + g));
        const std::vector<float> c_g(c.begin() + at, c.begin() + at + m * n);
        const std::vector<double> want = Reference(ta, tb, m, n, k, 0.5f, a[g], b[g], 2.0f, c_g);
        std::copy(want.begin(), want.end(), expected.begin() + at);
        groups.push_back({View(a[g].data(), ta ? std::vector<int64_t>{k, m} : std::vector{m, k}),
                          View(b[g].data(), tb ? std::vector<int64_t>{n, k} : std::vector{k, n}),
                          View(c.data() + at, {m, n})});
        at += m * n + 1;  // one untouched value after each group's c
      }
      ASSERT_TRUE(CpuCompute::Get().GroupedGemm(groups, ta, tb, 0.5f, 2.0f).ok());
      for (size_t i = 0; i < c.size(); ++i) EXPECT_NEAR(c[i], expected[i], 1e-4) << ta << tb << i;
    }
  }
}

// What a grouped GEMM refuses, each named with its group: no groups, an empty problem, a group
// of another dtype, shapes that do not chain, and two groups writing the same memory (the groups
// may run at once, so their sums would race).
TEST(CpuCompute, GroupedGemmRefusesBadGroupsNamingThem) {
  std::vector<float> x(64, 1.0f);
  std::vector<uint16_t> half(64, 0);
  const TensorView bf16{half.data(), DType::kBF16, Device{}, {2, 3}, {}};
  const auto call = [](std::vector<GemmGroup> groups) {
    return std::string(CpuCompute::Get().GroupedGemm(groups, false, true, 1.0f, 0.0f).message());
  };
  const GemmGroup good{View(x.data(), {2, 3}), View(x.data(), {4, 3}), View(x.data() + 8, {2, 4})};
  EXPECT_THAT(call({}), testing::StrEq("GroupedGemm: no groups"));
  EXPECT_THAT(
      call({good, {View(x.data(), {0, 3}), View(x.data(), {4, 3}), View(x.data() + 16, {0, 4})}}),
      testing::StartsWith("GroupedGemm, group 1: an empty problem"));
  EXPECT_THAT(call({good, {bf16, bf16, View(x.data() + 16, {2, 2})}}),
              testing::StrEq("GroupedGemm, group 1: operand 'a' expected f32, found bf16"));
  EXPECT_THAT(
      call({good, {View(x.data(), {2, 3}), View(x.data(), {4, 2}), View(x.data() + 16, {2, 4})}}),
      testing::StartsWith("GroupedGemm, group 1: shapes do not chain"));
  EXPECT_THAT(
      call({good,
            {View(x.data(), {2, 3}), View(x.data(), {4, 3}), View(x.data() + 20, {2, 4})},
            {View(x.data(), {2, 3}), View(x.data(), {4, 3}), View(x.data() + 15, {2, 4})}}),
      testing::StrEq("GroupedGemm: groups 0 and 2 write overlapping memory of c; the groups may "
                     "run at once, so split them over calls"));
}

// Attention with position offsets, as context parallelism computes it: the queries split into two
// chunks, each against the keys up to its end, give the whole sequence's outputs and lse, and
// their key and value gradients add up to the whole sequence's.
TEST(CpuCompute, AttentionChunksWithOffsetsMatchTheWholeSequence) {
  constexpr int64_t kBatch = 2, kT = 45, kHeads = 4, kKvHeads = 2, kHd = 8, kSplit = 19;
  const int64_t q_row = kHeads * kHd, kv_row = kKvHeads * kHd;
  std::vector<float> q = Random(kBatch * kT * q_row, 7), k = Random(kBatch * kT * kv_row, 8);
  std::vector<float> v = Random(kBatch * kT * kv_row, 9), dout = Random(q.size(), 10);
  Compute& compute = CpuCompute::Get();
  AttentionSpec whole{kBatch, kT, kT, kHeads, kKvHeads, kHd, 0, 0};
  std::vector<float> out(q.size()), lse(kBatch * kHeads * kT);
  std::vector<float> dq(q.size()), dk(k.size()), dv(v.size());
  const auto view = [](std::vector<float>& x) { return View(x.data(), {int64_t(x.size())}); };
  ASSERT_TRUE(
      compute.AttentionForward(whole, view(q), view(k), view(v), view(out), view(lse)).ok());
  ASSERT_TRUE(compute
                  .AttentionBackward(whole, view(dout), view(q), view(k), view(v), view(out),
                                     view(lse), view(dq), view(dk), view(dv))
                  .ok());
  // Rows [first, first + rows) of every batch row, of a [batch, kT, width] tensor.
  const auto rows_of = [](const std::vector<float>& x, int64_t first, int64_t rows, int64_t width) {
    std::vector<float> part;
    for (int64_t b = 0; b < kBatch; ++b) {
      const float* start = x.data() + (b * kT + first) * width;
      part.insert(part.end(), start, start + rows * width);
    }
    return part;
  };
  std::vector<float> dk_sum(k.size()), dv_sum(v.size());
  for (const auto& [first, rows] :
       {std::pair<int64_t, int64_t>{0, kSplit}, {kSplit, kT - kSplit}}) {
    const int64_t kv_len = first + rows;  // the keys up to the chunk's end
    AttentionSpec chunk{kBatch, rows, kv_len, kHeads, kKvHeads, kHd, first, 0};
    std::vector<float> cq = rows_of(q, first, rows, q_row),
                       cdout = rows_of(dout, first, rows, q_row);
    std::vector<float> ck = rows_of(k, 0, kv_len, kv_row), cv = rows_of(v, 0, kv_len, kv_row);
    std::vector<float> cout(cq.size()), clse(kBatch * kHeads * rows);
    std::vector<float> cdq(cq.size()), cdk(ck.size()), cdv(cv.size());
    ASSERT_TRUE(
        compute.AttentionForward(chunk, view(cq), view(ck), view(cv), view(cout), view(clse)).ok());
    ASSERT_TRUE(compute
                    .AttentionBackward(chunk, view(cdout), view(cq), view(ck), view(cv), view(cout),
                                       view(clse), view(cdq), view(cdk), view(cdv))
                    .ok());
    const std::vector<float> want_out = rows_of(out, first, rows, q_row);
    const std::vector<float> want_dq = rows_of(dq, first, rows, q_row);
    for (size_t i = 0; i < cout.size(); ++i) {
      ASSERT_NEAR(cout[i], want_out[i], 1e-5) << first << " " << i;
      ASSERT_NEAR(cdq[i], want_dq[i], 1e-4) << first << " " << i;
    }
    for (int64_t b = 0; b < kBatch; ++b) {
      for (int64_t h = 0; h < kHeads; ++h) {
        for (int64_t i = 0; i < rows; ++i) {
          ASSERT_NEAR(clse[(b * kHeads + h) * rows + i], lse[(b * kHeads + h) * kT + first + i],
                      1e-5);
        }
      }
      for (int64_t j = 0; j < kv_len * kv_row; ++j) {
        dk_sum[b * kT * kv_row + j] += cdk[b * kv_len * kv_row + j];
        dv_sum[b * kT * kv_row + j] += cdv[b * kv_len * kv_row + j];
      }
    }
  }
  for (size_t i = 0; i < dk.size(); ++i) {
    EXPECT_NEAR(dk_sum[i], dk[i], 1e-4) << i;
    EXPECT_NEAR(dv_sum[i], dv[i], 1e-4) << i;
  }
}

// The ring of context parallelism: the queries attend to blocks of keys one at a time, in any
// order, and AttentionMerge folds the partial results into the whole attention; the backward of
// each block with the merged out and lse gives that block's share of the gradients.
TEST(CpuCompute, AttentionMergeOfKeyBlocksIsTheWholeAttention) {
  constexpr int64_t kBatch = 2, kT = 24, kHeads = 4, kKvHeads = 2, kHd = 8;
  const int64_t q_row = kHeads * kHd, kv_row = kKvHeads * kHd;
  std::vector<float> q = Random(kBatch * kT * q_row, 21), k = Random(kBatch * kT * kv_row, 22);
  std::vector<float> v = Random(kBatch * kT * kv_row, 23), dout = Random(q.size(), 24);
  Compute& compute = CpuCompute::Get();
  const auto view = [](std::vector<float>& x) { return View(x.data(), {int64_t(x.size())}); };
  const AttentionSpec whole{kBatch, kT, kT, kHeads, kKvHeads, kHd, 0, 0};
  std::vector<float> out(q.size()), lse(kBatch * kHeads * kT);
  std::vector<float> dq(q.size()), dk(k.size()), dv(v.size());
  ASSERT_TRUE(
      compute.AttentionForward(whole, view(q), view(k), view(v), view(out), view(lse)).ok());
  ASSERT_TRUE(compute
                  .AttentionBackward(whole, view(dout), view(q), view(k), view(v), view(out),
                                     view(lse), view(dq), view(dk), view(dv))
                  .ok());
  // Key blocks [first, first + 8), visited last block first: the first merge starts from
  // "nothing seen" (lse -inf), and the last block is wholly after the early queries.
  const auto block_of = [](const std::vector<float>& x, int64_t first, int64_t rows,
                           int64_t width) {
    std::vector<float> part;
    for (int64_t b = 0; b < kBatch; ++b) {
      const float* start = x.data() + (b * kT + first) * width;
      part.insert(part.end(), start, start + rows * width);
    }
    return part;
  };
  std::vector<float> merged(q.size()),
      merged_lse(lse.size(), -std::numeric_limits<float>::infinity());
  for (int64_t first : {16, 0, 8}) {
    std::vector<float> bk = block_of(k, first, 8, kv_row), bv = block_of(v, first, 8, kv_row);
    const AttentionSpec block{kBatch, kT, 8, kHeads, kKvHeads, kHd, 0, first};
    std::vector<float> part(q.size()), part_lse(lse.size());
    ASSERT_TRUE(
        compute.AttentionForward(block, view(q), view(bk), view(bv), view(part), view(part_lse))
            .ok());
    ASSERT_TRUE(
        compute.AttentionMerge(block, view(part), view(part_lse), view(merged), view(merged_lse))
            .ok());
  }
  for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(merged[i], out[i], 1e-5) << i;
  for (size_t i = 0; i < lse.size(); ++i) ASSERT_NEAR(merged_lse[i], lse[i], 1e-5) << i;
  std::vector<float> dq_sum(q.size());
  for (int64_t first : {0, 8, 16}) {
    std::vector<float> bk = block_of(k, first, 8, kv_row), bv = block_of(v, first, 8, kv_row);
    const AttentionSpec block{kBatch, kT, 8, kHeads, kKvHeads, kHd, 0, first};
    std::vector<float> bdk(bk.size()), bdv(bv.size());
    ASSERT_TRUE(compute
                    .AttentionBackward(block, view(dout), view(q), view(bk), view(bv), view(merged),
                                       view(merged_lse), view(dq_sum), view(bdk), view(bdv))
                    .ok());
    const std::vector<float> want_dk = block_of(dk, first, 8, kv_row);
    const std::vector<float> want_dv = block_of(dv, first, 8, kv_row);
    for (size_t i = 0; i < bdk.size(); ++i) {
      ASSERT_NEAR(bdk[i], want_dk[i], 1e-4) << first << " " << i;
      ASSERT_NEAR(bdv[i], want_dv[i], 1e-4) << first << " " << i;
    }
  }
  for (size_t i = 0; i < dq.size(); ++i) ASSERT_NEAR(dq_sum[i], dq[i], 1e-4) << i;
}

// Float8: each row's (or the tensor's) largest magnitude lands on the format's largest finite
// value, decoding times the inverse scale gives x back to e4m3's precision, and the GEMM is the
// product of the decoded operands with the scales applied to the sums.
TEST(CpuCompute, Float8QuantizeAndGemmFollowTheScales) {
  constexpr int64_t kM = 6, kK = 32, kN = 5;
  std::vector<float> x = Random(kM * kK, 31), w = Random(kN * kK, 32);
  for (int64_t j = 0; j < kK; ++j) x[2 * kK + j] *= 100.0f;  // one row far larger than the rest
  Compute& compute = CpuCompute::Get();
  for (const Float8Granularity granularity :
       {Float8Granularity::kTensor, Float8Granularity::kRow}) {
    const bool per_row = granularity == Float8Granularity::kRow;
    std::vector<uint8_t> xq(x.size()), wq(w.size());
    std::vector<float> xs(per_row ? kM : 1), ws(per_row ? kN : 1);
    const TensorView xq_view{xq.data(), DType::kF8E4M3, Device{}, {kM, kK}, {}};
    const TensorView wq_view{wq.data(), DType::kF8E4M3, Device{}, {kN, kK}, {}};
    ASSERT_TRUE(compute
                    .Float8Quantize(View(x.data(), {kM, kK}), {granularity, false, false, {}},
                                    xq_view, View(xs.data(), {int64_t(xs.size())}))
                    .ok());
    ASSERT_TRUE(compute
                    .Float8Quantize(View(w.data(), {kN, kK}), {granularity, false, false, {}},
                                    wq_view, View(ws.data(), {int64_t(ws.size())}))
                    .ok());
    for (int64_t i = 0; i < kM; ++i) {
      float amax = 0;
      for (int64_t j = 0; j < kK; ++j) {
        const float decoded = float8::DecodeFloat8(xq[i * kK + j], float8::kE4M3);
        amax = std::max(amax, std::fabs(decoded));
        const float back = decoded * xs[per_row ? i : 0];
        // e4m3 keeps 3 mantissa bits: half a unit is 1/16 of the value, plus the subnormal step.
        EXPECT_NEAR(back, x[i * kK + j], std::fabs(x[i * kK + j]) / 16 + xs[per_row ? i : 0] / 256)
            << i << " " << j;
      }
      if (per_row || i == 2) {
        EXPECT_EQ(amax, 448.0f) << i;
      }
    }
    std::vector<float> c(kM * kN, 1.0f);
    ASSERT_TRUE(compute
                    .Float8Gemm(xq_view, View(xs.data(), {int64_t(xs.size())}), wq_view,
                                View(ws.data(), {int64_t(ws.size())}), 2.0f, 1.0f,
                                View(c.data(), {kM, kN}))
                    .ok());
    for (int64_t i = 0; i < kM; ++i) {
      for (int64_t j = 0; j < kN; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < kK; ++p) {
          sum += double(float8::DecodeFloat8(xq[i * kK + p], float8::kE4M3)) *
                 float8::DecodeFloat8(wq[j * kK + p], float8::kE4M3);
        }
        const double want = 2.0 * sum * xs[per_row ? i : 0] * ws[per_row ? j : 0] + 1.0;
        EXPECT_NEAR(c[i * kN + j], want, 1e-5 * std::fabs(want) + 1e-5) << i << " " << j;
      }
    }
  }
  // Transposed and per row: the rows of out are the columns of x, with power-of-two scales.
  std::vector<uint8_t> xt(x.size());
  std::vector<float> xts(kK);
  ASSERT_TRUE(compute
                  .Float8Quantize(View(x.data(), {kM, kK}),
                                  {Float8Granularity::kRow, true, true, {}},
                                  TensorView{xt.data(), DType::kF8E5M2, Device{}, {kK, kM}, {}},
                                  View(xts.data(), {kK}))
                  .ok());
  for (int64_t j = 0; j < kK; ++j) {
    int exponent = 0;
    EXPECT_EQ(std::frexp(xts[j], &exponent), 0.5f) << j;  // a power of two
    for (int64_t i = 0; i < kM; ++i) {
      const float back = float8::DecodeFloat8(xt[j * kM + i], float8::kE5M2) * xts[j];
      EXPECT_NEAR(back, x[i * kK + j], std::fabs(x[i * kK + j]) / 8 + xts[j] / 64) << i << " " << j;
    }
  }
  std::vector<uint8_t> too_small(4);
  EXPECT_THAT(
      compute
          .Float8Quantize(View(x.data(), {kM, kK}), {},
                          TensorView{too_small.data(), DType::kF8E4M3, Device{}, {2, 2}, {}},
                          View(xts.data(), {1}))
          .message(),
      testing::HasSubstr("Float8Quantize: operand 'out' expected [6, 32]"));
}

// Quantization is EncodeFloat8(x * scale) for every element, with torchao's scale, whichever way
// x arrives: f32 or bf16, as stored or transposed (the rows of out in bands of x's columns,
// here 37 of them: two whole bands and a part), tensorwise or per row, e4m3 or e5m2.
TEST(CpuCompute, Float8QuantizeEncodesEveryLayoutAndDtypeAlike) {
  constexpr int64_t kRows = 21, kColumns = 37;
  std::vector<float> x = Random(kRows * kColumns, 31);
  x[5] = -0.0f;
  x[6] = 1e-30f;  // below every code: a signed zero
  std::vector<uint16_t> x_bf16(x.size());
  std::vector<float> x_bf16_as_f32(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    x_bf16[i] = F32ToBf16(x[i]);
    x_bf16_as_f32[i] = Bf16ToF32(x_bf16[i]);
  }
  Compute& compute = CpuCompute::Get();
  for (const DType dtype : {DType::kF8E4M3, DType::kF8E5M2}) {
    const float8::Float8Format& format = dtype == DType::kF8E4M3 ? float8::kE4M3 : float8::kE5M2;
    for (const bool bf16 : {false, true}) {
      const std::vector<float>& values = bf16 ? x_bf16_as_f32 : x;
      const TensorView input =
          bf16 ? TensorView{x_bf16.data(), DType::kBF16, Device{}, {kRows, kColumns}, {}}
               : View(x.data(), {kRows, kColumns});
      for (const bool transpose : {false, true}) {
        const int64_t out_rows = transpose ? kColumns : kRows;
        const int64_t out_columns = transpose ? kRows : kColumns;
        auto value_at = [&](int64_t r, int64_t c) {
          return transpose ? values[c * kColumns + r] : values[r * kColumns + c];
        };
        for (const auto granularity : {Float8Granularity::kTensor, Float8Granularity::kRow}) {
          const bool per_row = granularity == Float8Granularity::kRow;
          std::vector<uint8_t> codes(x.size());
          std::vector<float> inverse(per_row ? out_rows : 1);
          ASSERT_TRUE(
              compute
                  .Float8Quantize(
                      input, {granularity, false, transpose, {}},
                      TensorView{codes.data(), dtype, Device{}, {out_rows, out_columns}, {}},
                      View(inverse.data(), {int64_t(inverse.size())}))
                  .ok());
          for (int64_t r = 0; r < out_rows; ++r) {
            float amax = 0.0f;
            for (int64_t c = 0; c < out_columns; ++c) {
              for (int64_t rr = per_row ? r : 0; rr < (per_row ? r + 1 : out_rows); ++rr) {
                amax = std::max(amax, std::fabs(value_at(rr, c)));
              }
            }
            const float scale =
                static_cast<float>(double(format.max_finite) / std::max(double(amax), 1e-12));
            EXPECT_EQ(inverse[per_row ? r : 0], 1.0f / scale) << r;
            for (int64_t c = 0; c < out_columns; ++c) {
              ASSERT_EQ(codes[r * out_columns + c],
                        float8::EncodeFloat8(value_at(r, c) * scale, format))
                  << "dtype " << int(dtype) << " bf16 " << bf16 << " transpose " << transpose
                  << " per row " << per_row << " at " << r << ", " << c;
            }
          }
        }
      }
    }
  }
}

// A chunk of queries placed before every key sees none: zeros, an lse of -inf, no gradient.
TEST(CpuCompute, AttentionQueriesThatSeeNoKeyGetZeros) {
  constexpr int64_t kT = 5, kHd = 4;
  std::vector<float> q = Random(kT * kHd, 11), k = Random(kT * kHd, 12), v = Random(kT * kHd, 13);
  std::vector<float> out(q.size(), 7.0f), lse(kT), dq(q.size()), dk(k.size()), dv(v.size());
  const AttentionSpec before{1, kT, kT, 1, 1, kHd, 0, kT};  // keys at positions kT..2kT-1
  Compute& compute = CpuCompute::Get();
  const auto view = [](std::vector<float>& x) { return View(x.data(), {int64_t(x.size())}); };
  ASSERT_TRUE(
      compute.AttentionForward(before, view(q), view(k), view(v), view(out), view(lse)).ok());
  for (float x : out) EXPECT_EQ(x, 0.0f);
  for (float x : lse) EXPECT_TRUE(std::isinf(x) && x < 0);
  ASSERT_TRUE(compute
                  .AttentionBackward(before, view(q), view(q), view(k), view(v), view(out),
                                     view(lse), view(dq), view(dk), view(dv))
                  .ok());
  for (float x : dk) EXPECT_EQ(x, 0.0f);
}

TEST(CpuCompute, AnOperandOnAnotherDeviceIsNamed) {
  std::vector<float> x(4), y(4);
  TensorView on_gpu = View(x.data(), {4});
  on_gpu.device = Device{DeviceType::kCuda, 1};
  const absl::Status status = CpuCompute::Get().Accumulate(on_gpu, View(y.data(), {4}));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), testing::HasSubstr("Accumulate: operand 'x' is on cuda:1"));
  EXPECT_THAT(status.message(), testing::HasSubstr("cpu:0"));
}

TEST(CpuCompute, AWrongDtypeOrSizeIsNamed) {
  std::vector<float> x(6), y(4);
  TensorView half{x.data(), DType::kBF16, Device{}, {6}, {}};
  EXPECT_THAT(CpuCompute::Get().Scale(half, 2.0f).message(),
              testing::HasSubstr("Scale: operand 'x' expected f32, found bf16"));
  EXPECT_THAT(CpuCompute::Get().Copy(View(x.data(), {6}), View(y.data(), {4})).message(),
              testing::HasSubstr("Copy: operand 'dst' expected 6 elements, found 4"));
  EXPECT_THAT(CpuCompute::Get()
                  .Gemm(View(x.data(), {2, 3}), false, View(x.data(), {2, 3}), false, 1, 0,
                        View(y.data(), {2, 2}))
                  .message(),
              testing::HasSubstr("shapes do not chain"));
}

TEST(CpuCompute, SumOfSquaresWeighsTensorsAndCarriesNonFinite) {
  std::vector<float> a = {1, 2}, b = {3}, out(2);
  const TensorView tensors[] = {View(a.data(), {2}), View(b.data(), {1})};
  const double weights[] = {1.0, 0.5};
  ASSERT_TRUE(CpuCompute::Get().SumOfSquares(tensors, weights, View(out.data(), {2})).ok());
  EXPECT_DOUBLE_EQ(static_cast<double>(out[0]) + out[1], 5.0 + 4.5);
  b[0] = std::numeric_limits<float>::infinity();
  ASSERT_TRUE(CpuCompute::Get().SumOfSquares(tensors, weights, View(out.data(), {2})).ok());
  EXPECT_TRUE(std::isinf(out[0]));
  b[0] = std::numeric_limits<float>::quiet_NaN();
  ASSERT_TRUE(CpuCompute::Get().SumOfSquares(tensors, weights, View(out.data(), {2})).ok());
  EXPECT_TRUE(std::isnan(out[0]));
}

TEST(CpuCompute, AbsMaxOfEachTensorCarriesNaN) {
  std::vector<float> a = {1, -5, 2}, b = {}, c = {0.5f}, out(3, -1.0f);
  std::vector<uint16_t> d = {F32ToBf16(-3.0f), F32ToBf16(0.25f)};
  TensorView d_view{d.data(), DType::kBF16, Device{}, {2}, {}};
  std::vector<TensorView> tensors = {View(a.data(), {3}), View(b.data(), {0}), View(c.data(), {1}),
                                     d_view};
  out.resize(4);
  ASSERT_TRUE(CpuCompute::Get().AbsMax(tensors, View(out.data(), {4})).ok());
  EXPECT_EQ(out, (std::vector<float>{5.0f, 0.0f, 0.5f, 3.0f}));
  a[2] = std::numeric_limits<float>::quiet_NaN();
  ASSERT_TRUE(CpuCompute::Get().AbsMax(tensors, View(out.data(), {4})).ok());
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_THAT(CpuCompute::Get().AbsMax(tensors, View(out.data(), {3})).message(),
              ::testing::HasSubstr("AbsMax: operand 'out' expected 4 elements, found 3"));
}

TEST(CpuCompute, TransposeMovesElementsOfAnySize) {
  std::vector<float> x = {1, 2, 3, 4, 5, 6}, t(6);
  ASSERT_TRUE(CpuCompute::Get().Transpose(View(x.data(), {2, 3}), View(t.data(), {3, 2})).ok());
  EXPECT_EQ(t, (std::vector<float>{1, 4, 2, 5, 3, 6}));
  std::vector<uint8_t> codes = {1, 2, 3, 4, 5, 6}, moved(6);
  const TensorView src{codes.data(), DType::kF8E4M3, Device{}, {3, 2}, {}};
  const TensorView dst{moved.data(), DType::kF8E4M3, Device{}, {2, 3}, {}};
  ASSERT_TRUE(CpuCompute::Get().Transpose(src, dst).ok());
  EXPECT_EQ(moved, (std::vector<uint8_t>{1, 3, 5, 2, 4, 6}));
  EXPECT_THAT(CpuCompute::Get().Transpose(src, src).message(),
              ::testing::HasSubstr("Transpose: operand 'dst' expected [2, 3], found [3, 2]"));
}

// A tensorwise quantization handed an amax scales by it, not by x's own: a run of a weight
// quantized with the whole weight's amax gets the whole weight's codes.
TEST(CpuCompute, Float8QuantizeScalesByAGivenAmax) {
  std::vector<float> whole = {0.1f, -3.0f, 0.7f, 12.0f, -0.02f, 5.5f};
  std::vector<uint8_t> whole_codes(6), run_codes(3);
  float whole_inverse = 0, run_inverse = 0, amax = 12.0f;
  const TensorView whole_out{whole_codes.data(), DType::kF8E4M3, Device{}, {1, 6}, {}};
  ASSERT_TRUE(
      CpuCompute::Get()
          .Float8Quantize(View(whole.data(), {1, 6}), {}, whole_out, View(&whole_inverse, {1}))
          .ok());
  const TensorView run_out{run_codes.data(), DType::kF8E4M3, Device{}, {1, 3}, {}};
  ASSERT_TRUE(CpuCompute::Get()
                  .Float8Quantize(View(whole.data(), {1, 3}),
                                  {Float8Granularity::kTensor, false, false, View(&amax, {1})},
                                  run_out, View(&run_inverse, {1}))
                  .ok());
  EXPECT_EQ(run_codes, std::vector<uint8_t>(whole_codes.begin(), whole_codes.begin() + 3));
  EXPECT_EQ(run_inverse, whole_inverse);
  // The run's own amax (3) gives other codes.
  ASSERT_TRUE(CpuCompute::Get()
                  .Float8Quantize(View(whole.data(), {1, 3}), {}, run_out, View(&run_inverse, {1}))
                  .ok());
  EXPECT_NE(run_inverse, whole_inverse);
}

// Float8Amax gives the amaxes Float8Quantize scales by, for the tensor or each row of out
// (transposed or not); quantizing the left half of each row by the whole rows' amaxes gives the
// whole rows' codes and scales: tensor parallelism's pieces of a rowwise operand.
TEST(CpuCompute, Float8AmaxGivesTheAmaxesThatQuantizeScalesBy) {
  std::vector<float> x = {0.1f,   -3.0f, 0.7f,   12.0f,  //
                          -0.02f, 5.5f,  -40.0f, 1.0f};
  std::vector<float> amax(4);
  auto amax_of = [&](Float8Granularity granularity, bool transpose, int64_t count) {
    EXPECT_TRUE(CpuCompute::Get()
                    .Float8Amax(View(x.data(), {2, 4}), {granularity, false, transpose, {}},
                                View(amax.data(), {count}))
                    .ok());
    return std::vector<float>(amax.begin(), amax.begin() + count);
  };
  EXPECT_EQ(amax_of(Float8Granularity::kTensor, false, 1), std::vector<float>{40.0f});
  EXPECT_EQ(amax_of(Float8Granularity::kRow, false, 2), (std::vector<float>{12.0f, 40.0f}));
  EXPECT_EQ(amax_of(Float8Granularity::kRow, true, 4),
            (std::vector<float>{0.1f, 5.5f, 40.0f, 12.0f}));
  std::vector<float> with_nan = x;
  with_nan[5] = std::numeric_limits<float>::quiet_NaN();
  ASSERT_TRUE(CpuCompute::Get()
                  .Float8Amax(View(with_nan.data(), {2, 4}),
                              {Float8Granularity::kRow, false, true, {}}, View(amax.data(), {4}))
                  .ok());
  EXPECT_EQ(amax[0], 0.1f);
  EXPECT_TRUE(std::isnan(amax[1]));
  EXPECT_THAT(CpuCompute::Get()
                  .Float8Amax(View(x.data(), {2, 4}), {Float8Granularity::kRow, false, false, {}},
                              View(amax.data(), {4}))
                  .message(),
              ::testing::HasSubstr("Float8Amax: operand 'amax' expected 2 elements, found 4"));

  // Rowwise, power-of-two scales: the halves [2, 2] quantized by the whole rows' amaxes.
  const Float8Scaling rowwise{Float8Granularity::kRow, true, false, {}};
  std::vector<uint8_t> whole_codes(8), half_codes(4);
  std::vector<float> whole_inverse(2), half_inverse(2),
      row_amax = amax_of(Float8Granularity::kRow, false, 2);
  ASSERT_TRUE(CpuCompute::Get()
                  .Float8Quantize(View(x.data(), {2, 4}), rowwise,
                                  {whole_codes.data(), DType::kF8E4M3, Device{}, {2, 4}, {}},
                                  View(whole_inverse.data(), {2}))
                  .ok());
  std::vector<float> left = {x[0], x[1], x[4], x[5]};
  Float8Scaling given = rowwise;
  given.amax = View(row_amax.data(), {2});
  ASSERT_TRUE(CpuCompute::Get()
                  .Float8Quantize(View(left.data(), {2, 2}), given,
                                  {half_codes.data(), DType::kF8E4M3, Device{}, {2, 2}, {}},
                                  View(half_inverse.data(), {2}))
                  .ok());
  EXPECT_EQ(half_inverse, whole_inverse);
  EXPECT_EQ(half_codes,
            (std::vector<uint8_t>{whole_codes[0], whole_codes[1], whole_codes[4], whole_codes[5]}));
  EXPECT_THAT(
      CpuCompute::Get()
          .Float8Quantize(View(left.data(), {2, 2}),
                          {Float8Granularity::kRow, false, false, View(row_amax.data(), {1})},
                          {half_codes.data(), DType::kF8E4M3, Device{}, {2, 2}, {}},
                          View(half_inverse.data(), {2}))
          .message(),
      ::testing::HasSubstr("Float8Quantize: operand 'amax' expected 2 elements, found 1"));
}

TEST(CpuCompute, CastRoundsToNearestEven) {
  std::vector<float> x = {1.0f + 1.0f / 256, 1.0f + 3.0f / 256}, back(2);
  std::vector<uint16_t> half(2);
  TensorView h{half.data(), DType::kBF16, Device{}, {2}, {}};
  ASSERT_TRUE(CpuCompute::Get().Cast(View(x.data(), {2}), h).ok());
  ASSERT_TRUE(CpuCompute::Get().Cast(h, View(back.data(), {2})).ok());
  EXPECT_EQ(back[0], 1.0f);               // a tie rounds to the even 1.0
  EXPECT_EQ(back[1], 1.0f + 4.0f / 256);  // a tie rounds up to the even neighbour
}

}  // namespace
}  // namespace titan
