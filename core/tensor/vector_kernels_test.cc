// Every vector kernel against its scalar reference on each instruction set this CPU runs
// (Highway's dispatch forced to one at a time): random inputs, edge values (NaN, inf, denormals,
// zero rows, rounding ties) and sizes that are no multiple of any vector width. Bit for bit where
// the arithmetic is the reference's; within the bound vector_kernels.h states where an exp or a
// sum's order differs.
#include "core/tensor/vector_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/tensor/adam.h"
#include "core/tensor/cross_entropy.h"
#include "core/tensor/rmsnorm.h"
#include "core/tensor/rope.h"
#include "core/tensor/swiglu.h"
#include "core/tensor/vector_kernels_test_support.h"
#include "hwy/targets.h"
#include "titan/float16.h"

namespace titan {
namespace {

// Every sign, exponent and high mantissa with the low halves that decide rounding (exact, just
// below, at and just above the tie, all ones), then random patterns.
std::vector<float> CastInputs() {
  std::vector<float> values;
  const uint32_t lows[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff};
  for (uint32_t high = 0; high < 0x10000; ++high) {
    for (uint32_t low : lows) values.push_back(FromBits(high << 16 | low));
  }
  std::mt19937 random(35);
  for (int i = 0; i < 100000; ++i) values.push_back(FromBits(random()));
  return values;
}

TEST_P(VectorKernelsTest, RunsOnTheForcedTarget) {
  EXPECT_STREQ(VectorKernelsTarget(), hwy::TargetName(GetParam()));
}

TEST_P(VectorKernelsTest, F32ToBf16IsTheScalarCastBitForBit) {
  const std::vector<float> in = CastInputs();
  const int64_t n = static_cast<int64_t>(in.size());
  std::vector<uint16_t> out(in.size());
  VectorCastF32ToBf16(in.data(), out.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(out[i], F32ToBf16(in[i])) << "input bits 0x" << std::hex << Bits(in[i]);
  }
  // Unaligned starts and every tail length; the element past the end stays untouched.
  for (int64_t size : kSizes) {
    std::vector<uint16_t> part(size + 1, 0xabcd);
    VectorCastF32ToBf16(in.data() + 1, part.data(), size);
    for (int64_t i = 0; i < size; ++i) ASSERT_EQ(part[i], F32ToBf16(in[i + 1])) << size;
    EXPECT_EQ(part[size], 0xabcd) << size;
  }
}

TEST_P(VectorKernelsTest, F32ToBf16RoundsToNearestEvenAndKeepsNaN) {
  const uint32_t in[] = {0x3f808000,   // tie, even below: down
                         0x3f818000,   // tie, odd below: up
                         0x3f808001,   // above the tie: up
                         0x7f7fffff,   // largest finite: rounds to inf
                         0x00000001,   // smallest denormal: to +0
                         0x80018000,   // negative denormal tie, odd below: up
                         0x7f800000,   // inf
                         0x7fa00000,   // signalling NaN: quieted
                         0xffc00001,   // negative NaN whose low bits would carry
                         0x7f80ffff};  // NaN with only low payload bits: must not become inf
  const uint16_t expected[] = {0x3f80, 0x3f82, 0x3f81, 0x7f80, 0x0000,
                               0x8002, 0x7f80, 0x7fe0, 0xffc0, 0x7fc0};
  std::vector<float> values;
  for (uint32_t bits : in) values.push_back(FromBits(bits));
  // Repeated past a vector width so that the vector body, not only the tail, sees each.
  const size_t copies = 8;
  std::vector<float> wide;
  for (size_t c = 0; c < copies; ++c) wide.insert(wide.end(), values.begin(), values.end());
  std::vector<uint16_t> out(wide.size());
  VectorCastF32ToBf16(wide.data(), out.data(), static_cast<int64_t>(wide.size()));
  for (size_t i = 0; i < wide.size(); ++i) {
    EXPECT_EQ(out[i], expected[i % values.size()]) << "input bits 0x" << std::hex << Bits(wide[i]);
  }
}

TEST_P(VectorKernelsTest, Bf16ToF32IsExactForEveryBf16) {
  std::vector<uint16_t> in(0x10000);
  for (uint32_t bits = 0; bits < 0x10000; ++bits) in[bits] = static_cast<uint16_t>(bits);
  std::vector<float> out(in.size());
  VectorCastBf16ToF32(in.data(), out.data(), static_cast<int64_t>(in.size()));
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    ASSERT_EQ(Bits(out[bits]), bits << 16) << "bf16 0x" << std::hex << bits;
    ASSERT_EQ(Bits(out[bits]), Bits(Bf16ToF32(in[bits])));
  }
  for (int64_t size : kSizes) {
    std::vector<float> part(size + 1, 7.0f);
    VectorCastBf16ToF32(in.data() + 3, part.data(), size);
    for (int64_t i = 0; i < size; ++i) ASSERT_EQ(Bits(part[i]), Bits(Bf16ToF32(in[i + 3])));
    EXPECT_EQ(part[size], 7.0f) << size;
  }
}

// Parameters, gradients and moments drawn from a wide range with edge values mixed in.
struct AdamBuffers {
  std::vector<float> param, grad, m, v;
};

AdamBuffers MakeAdamBuffers(int64_t n, uint32_t seed) {
  const float edges[] = {0.0f,     -0.0f,     1e-40f, -1e-40f, 1e-45f, NAN,
                         INFINITY, -INFINITY, 3e38f,  -3e38f,  1e-20f, 1.0f};
  std::mt19937 random(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> scale(-30, 10);
  std::uniform_int_distribution<int> pick(0, 15);
  auto draw = [&]() {
    const int choice = pick(random);
    if (choice < static_cast<int>(std::size(edges))) return edges[choice];
    return std::ldexp(normal(random), scale(random));
  };
  AdamBuffers b;
  for (int64_t i = 0; i < n; ++i) {
    b.param.push_back(draw());
    b.grad.push_back(draw());
    b.m.push_back(draw());
    b.v.push_back(std::fabs(draw()));
  }
  return b;
}

void ExpectSameAdamUpdate(const AdamUpdate& update, int64_t n) {
  const AdamConstants c = MakeAdamConstants(update);
  AdamBuffers vector = MakeAdamBuffers(n, static_cast<uint32_t>(n));
  AdamBuffers scalar = vector;
  VectorAdamUpdate(c, vector.param.data(), vector.grad.data(), vector.m.data(), vector.v.data(), n);
  ScalarAdamUpdate(c, scalar.param.data(), scalar.grad.data(), scalar.m.data(), scalar.v.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(SameValue(vector.param[i], scalar.param[i]))
        << "param " << i << " of " << n << ": " << vector.param[i] << " vs " << scalar.param[i];
    ASSERT_TRUE(SameValue(vector.m[i], scalar.m[i])) << "exp_avg " << i << " of " << n;
    ASSERT_TRUE(SameValue(vector.v[i], scalar.v[i])) << "exp_avg_sq " << i << " of " << n;
  }
}

TEST_P(VectorKernelsTest, AdamWIsTheScalarUpdateBitForBit) {
  AdamUpdate update;
  update.lr = 1e-3;
  update.weight_decay = 0.1;
  update.step = 3;
  update.decoupled_weight_decay = true;
  for (int64_t n : kSizes) ExpectSameAdamUpdate(update, n);
}

TEST_P(VectorKernelsTest, AdamIsTheScalarUpdateBitForBit) {
  AdamUpdate update;
  update.lr = 3e-4;
  update.beta2 = 0.999;
  update.weight_decay = 0.01;
  update.step = 1;
  update.decoupled_weight_decay = false;
  for (int64_t n : kSizes) ExpectSameAdamUpdate(update, n);
}

// The update itself, so that a reference and vector code wrong in the same way cannot pass: one
// AdamW step from zero moments moves each weight by lr * sign(grad) (up to eps), after the decay.
TEST_P(VectorKernelsTest, AdamWFirstStepMovesByTheLearningRate) {
  AdamUpdate update;
  update.lr = 0.01;
  update.weight_decay = 0.1;
  update.step = 1;
  const int64_t n = 37;
  std::vector<float> param(n, 2.0f), grad(n), m(n, 0.0f), v(n, 0.0f);
  for (int64_t i = 0; i < n; ++i) grad[i] = (i % 2 ? -1.0f : 1.0f) * static_cast<float>(i + 1);
  VectorAdamUpdate(MakeAdamConstants(update), param.data(), grad.data(), m.data(), v.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    const float decayed = 2.0f * (1.0f - 0.01f * 0.1f);
    EXPECT_NEAR(param[i], decayed - 0.01f * (i % 2 ? -1.0f : 1.0f), 1e-6f) << i;
    // 1 - beta1 and 1 - beta2 are rounded to f32 first, a few ulps from 0.1 and 0.05.
    EXPECT_NEAR(m[i], 0.1f * grad[i], 1e-6f * std::fabs(grad[i])) << i;
    EXPECT_NEAR(v[i], 0.05f * grad[i] * grad[i], 1e-6f * grad[i] * grad[i]) << i;
  }
}

// Distance in representable f32 values (0 and -0 one apart are counted as equal).
int64_t UlpDistance(float a, float b) {
  auto ordered = [](float x) {
    const int64_t bits = static_cast<int32_t>(Bits(x));
    return bits < 0 ? -(bits & 0x7fffffff) : bits;
  };
  return std::llabs(ordered(a) - ordered(b));
}

// Within `ulps` f32 rounding steps of a magnitude `scale` (what the operands' size makes one
// rounding worth, for results that cancel), or the same value; NaN only against NaN.
bool Close(float vector, float reference, double scale, int ulps) {
  if (std::isnan(vector) || std::isnan(reference))
    return std::isnan(vector) && std::isnan(reference);
  if (std::isinf(vector) || std::isinf(reference)) return vector == reference;
  const double step = std::max(std::ldexp(std::fabs(scale), -23), 1.4e-45);
  return std::fabs(static_cast<double>(vector) - reference) <= ulps * step;
}

// Edge values mixed among normal draws of varied scale: every kernel input below draws from these.
std::vector<float> MixedValues(int64_t n, uint32_t seed, float spread = 4.0f) {
  const float edges[] = {0.0f,      -0.0f, 1e-40f, -1e-40f, 1e-45f,  NAN,   INFINITY,
                         -INFINITY, 88.8f, -88.8f, 100.0f,  -100.0f, 3e38f, -3e38f};
  std::mt19937 random(seed);
  std::normal_distribution<float> normal(0.0f, spread);
  std::uniform_int_distribution<int> pick(0, 40);
  std::vector<float> values(n);
  for (float& value : values) {
    const int choice = pick(random);
    value = choice < static_cast<int>(std::size(edges)) ? edges[choice] : normal(random);
  }
  return values;
}

std::vector<float> NormalValues(int64_t n, uint32_t seed, float spread = 1.0f) {
  std::mt19937 random(seed);
  std::normal_distribution<float> normal(0.0f, spread);
  std::vector<float> values(n);
  for (float& value : values) value = normal(random);
  return values;
}

// Every 61st f32 of [-104, 89] (36.7M values; every one of them, stride 1, gave the same maximum
// when this bound was set): VectorExp against exp in double rounded to f32.
TEST_P(VectorKernelsTest, ExpIsWithinItsUlpBound) {
  int64_t worst = 0;
  float worst_at = 0;
  const uint32_t ends[2] = {0x42b20000u /* 89 */, 0xc2d00000u /* -104 */};
  for (uint32_t sign = 0; sign < 2; ++sign) {
    const uint32_t first = sign << 31, last = ends[sign];
    std::vector<float> in, out;
    for (uint32_t bits = first; bits <= last;) {
      in.clear();
      for (; bits <= last && in.size() < (1u << 20); bits += 61) in.push_back(FromBits(bits));
      out.resize(in.size());
      VectorExp(in.data(), out.data(), static_cast<int64_t>(in.size()));
      for (size_t i = 0; i < in.size(); ++i) {
        const float exact = static_cast<float>(std::exp(static_cast<double>(in[i])));
        const int64_t distance = UlpDistance(out[i], exact);
        if (distance > worst) worst = distance, worst_at = in[i];
      }
    }
  }
  EXPECT_LE(worst, ExpUlps()) << "at " << worst_at;
  std::printf("VectorExp on %s: at most %lld ulps from exp\n", VectorKernelsTarget(),
              static_cast<long long>(worst));
}

TEST_P(VectorKernelsTest, ExpHasExpfsSpecialValues) {
  const float in[] = {
      NAN,   -NAN,  INFINITY, -INFINITY, 0.0f,   -0.0f,   1e-45f, -1e-40f, 88.72283935546875f,
      89.0f, 1e30f, -104.5f,  -1e30f,    -87.5f, -103.5f, 1.0f};
  const int64_t n = static_cast<int64_t>(std::size(in));
  // Twice over, so that the vector body and the tail see each value.
  std::vector<float> wide(in, in + n);
  wide.insert(wide.end(), in, in + n);
  wide.push_back(1.0f);
  std::vector<float> out(wide.size());
  VectorExp(wide.data(), out.data(), static_cast<int64_t>(wide.size()));
  for (size_t i = 0; i < wide.size(); ++i) {
    const float expected = std::exp(wide[i]);
    if (std::isnan(expected) || std::isinf(expected) || expected == 0.0f || expected == 1.0f) {
      EXPECT_TRUE(SameValue(out[i], expected)) << wide[i] << ": " << out[i] << " vs " << expected;
    } else {
      // Denormal results: within the bound in units of the smallest denormal.
      EXPECT_LE(UlpDistance(out[i], expected), ExpUlps()) << wide[i];
    }
  }
}

// The bound of the SwiGLU kernels (vector_kernels.h): the exp's, a division and a product. da's
// slope 1 + a * (1 - sigmoid) cancels near a = -1.28, so its bound is in units of its terms' size.
constexpr int kSwiGluUlps = kExpUlpsApart + 2;

TEST_P(VectorKernelsTest, SwiGluIsTheReferenceWithinItsBound) {
  for (int64_t n : kSizes) {
    const std::vector<float> a = MixedValues(n, 1), b = MixedValues(n, 2), dout = MixedValues(n, 3);
    const std::vector<float> da0 = NormalValues(n, 4), db0 = NormalValues(n, 5);
    std::vector<float> out(n), expected(n);
    VectorSwiGluForward(out.data(), a.data(), b.data(), n);
    SwiGluForward(expected.data(), a.data(), b.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_TRUE(Close(out[i], expected[i], expected[i], kSwiGluUlps))
          << "out " << i << " of " << n << ": a " << a[i] << " b " << b[i] << ": " << out[i]
          << " vs " << expected[i];
    }
    std::vector<float> da = da0, db = db0, expected_da = da0, expected_db = db0;
    VectorSwiGluBackward(da.data(), db.data(), dout.data(), a.data(), b.data(), n);
    SwiGluBackward(expected_da.data(), expected_db.data(), dout.data(), a.data(), b.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double sigmoid = 1.0 / (1.0 + std::exp(-static_cast<double>(a[i])));
      const double term = std::fabs(static_cast<double>(dout[i]) * b[i] * sigmoid);
      const double da_scale = std::fabs(da0[i]) + term * (2.0 + std::fabs(a[i]));
      const double db_scale =
          std::fabs(db0[i]) + std::fabs(static_cast<double>(dout[i]) * a[i] * sigmoid);
      ASSERT_TRUE(Close(da[i], expected_da[i], da_scale, kSwiGluUlps))
          << "da " << i << " of " << n << ": a " << a[i] << ": " << da[i] << " vs "
          << expected_da[i];
      ASSERT_TRUE(Close(db[i], expected_db[i], db_scale, kSwiGluUlps))
          << "db " << i << " of " << n << ": a " << a[i] << ": " << db[i] << " vs "
          << expected_db[i];
    }
  }
}

// Each element's result does not depend on where it sits (tensor-parallel shards move the tails).
TEST_P(VectorKernelsTest, SwiGluGivesTheSameBitsAtEveryOffset) {
  if (ExpByReference()) {
    GTEST_SKIP() << "the scalar reference's omp simd loop ends with glibc's scalar expf";
  }
  const int64_t n = 1000;
  const std::vector<float> a = MixedValues(n, 6), b = MixedValues(n, 7);
  std::vector<float> whole(n);
  VectorSwiGluForward(whole.data(), a.data(), b.data(), n);
  for (int64_t offset : {1, 3, 7, 13}) {
    std::vector<float> part(n - offset);
    VectorSwiGluForward(part.data(), a.data() + offset, b.data() + offset, n - offset);
    for (int64_t i = 0; i < n - offset; ++i) {
      ASSERT_TRUE(SameValue(part[i], whole[i + offset])) << offset << " " << i;
    }
  }
}

// Rows of c channels: random ones, a zero row, a row of denormals, a row with a NaN, one with inf.
std::vector<float> NormRows(int64_t n, int64_t c, uint32_t seed) {
  std::vector<float> x = NormalValues(n * c, seed, 2.0f);
  if (n > 1) std::fill_n(x.begin() + c, c, 0.0f);
  if (n > 2) std::fill_n(x.begin() + 2 * c, c, 3e-41f);
  if (n > 3) x[3 * c + c / 2] = NAN;
  if (n > 4) x[4 * c] = -INFINITY;
  return x;
}

// rstd and the backward's coefficient come from sums in double in another order: 1 ulp apart at
// most, and then every output moves by at most that ulp's share (2 steps of its terms' size).
constexpr int kRmsNormUlps = 2;

TEST_P(VectorKernelsTest, RmsNormIsTheReferenceWithinItsBound) {
  const int64_t rows = 6;
  int64_t rows_identical = 0, rows_total = 0;
  for (int64_t c : {1, 7, 15, 17, 33, 64, 1000, 1003}) {
    const std::vector<float> x = NormRows(rows, c, 10), w = MixedValues(c, 11, 1.0f);
    std::vector<float> out(rows * c), rstd(rows), expected(rows * c), expected_rstd(rows);
    VectorRmsNormForward(out.data(), rstd.data(), x.data(), w.data(), rows, c, kRmsNormEps);
    RmsNormForward(expected.data(), expected_rstd.data(), x.data(), w.data(), rows, c);
    for (int64_t i = 0; i < rows; ++i) {
      ASSERT_TRUE(SameValue(rstd[i], expected_rstd[i]) ||
                  UlpDistance(rstd[i], expected_rstd[i]) <= 1)
          << "rstd of row " << i << ", c " << c << ": " << rstd[i] << " vs " << expected_rstd[i];
      const bool identical = SameValue(rstd[i], expected_rstd[i]);
      rows_identical += identical, ++rows_total;
      for (int64_t j = 0; j < c; ++j) {
        const int64_t at = i * c + j;
        // Given the same rstd, the same bits: x * rstd * weight lane by lane.
        ASSERT_TRUE(identical ? SameValue(out[at], expected[at])
                              : Close(out[at], expected[at], expected[at], kRmsNormUlps))
            << "out " << i << ", " << j << " of c " << c;
      }
    }
    const std::vector<float> dout = MixedValues(rows * c, 12, 1.0f);
    const std::vector<float> dinp0 = NormalValues(rows * c, 13), dweight0 = NormalValues(c, 14);
    std::vector<float> dinp = dinp0, dweight = dweight0, expected_dinp = dinp0,
                       expected_dweight = dweight0;
    VectorRmsNormBackward(dinp.data(), dweight.data(), dout.data(), x.data(), w.data(),
                          expected_rstd.data(), rows, c);
    RmsNormBackward(expected_dinp.data(), expected_dweight.data(), dout.data(), x.data(), w.data(),
                    expected_rstd.data(), rows, c);
    for (int64_t j = 0; j < c; ++j) {
      ASSERT_TRUE(SameValue(dweight[j], expected_dweight[j])) << "dweight " << j << " of " << c;
    }
    for (int64_t i = 0; i < rows; ++i) {
      double dot = 0;
      for (int64_t j = 0; j < c; ++j)
        dot += static_cast<double>(w[j]) * dout[i * c + j] * x[i * c + j];
      const double r = expected_rstd[i], coefficient = dot / c * r * r;
      for (int64_t j = 0; j < c; ++j) {
        const int64_t at = i * c + j;
        const double scale =
            std::fabs(dinp0[at]) + std::fabs(r) * (std::fabs(static_cast<double>(w[j]) * dout[at]) +
                                                   std::fabs(x[at] * coefficient));
        ASSERT_TRUE(Close(dinp[at], expected_dinp[at], scale, kRmsNormUlps))
            << "dinp " << i << ", " << j << " of c " << c << ": " << dinp[at] << " vs "
            << expected_dinp[at];
      }
    }
  }
  std::printf("RMSNorm on %s: rstd bit for bit in %lld of %lld rows\n", VectorKernelsTarget(),
              static_cast<long long>(rows_identical), static_cast<long long>(rows_total));
}

// Logit rows: random ones (varied spread), a zero row, one of -inf but one entry (a causal mask's
// shape), one with a NaN, one with +inf, one of denormals.
std::vector<float> LogitRows(int64_t n, int64_t v, uint32_t seed) {
  std::vector<float> x;
  for (int64_t i = 0; i < n; ++i) {
    const std::vector<float> row = NormalValues(v, seed + static_cast<uint32_t>(i), 1.0f + 3 * i);
    x.insert(x.end(), row.begin(), row.end());
  }
  auto row = [&](int64_t i) { return x.begin() + i * v; };
  if (n > 1) std::fill_n(row(1), v, 0.0f);
  if (n > 2) std::fill_n(row(2), v, -INFINITY), row(2)[v / 2] = 1.0f;
  if (n > 3) row(3)[v - 1] = NAN;
  if (n > 4) row(4)[0] = INFINITY;
  if (n > 5) std::fill_n(row(5), v, 1e-41f);
  return x;
}

// The sum of exps: each term within kExpUlpsApart, summed in double in another order.
constexpr int kSumExpUlps = kExpUlpsApart + 1;
// The gradient: the exp's bound and the product by the row's scale; the target's column, where
// softmax - 1 cancels, in units of the row's scale.
constexpr int kSoftmaxUlps = kExpUlpsApart + 1;

TEST_P(VectorKernelsTest, CrossEntropyIsTheReferenceWithinItsBound) {
  const int64_t rows = 7;
  for (int64_t v : {1, 7, 15, 17, 33, 1000, 8192 + 3}) {
    const std::vector<float> logits = LogitRows(rows, v, 20);
    std::vector<float> max(rows), sum(rows), expected_sum(rows);
    CrossEntropyRowMax(max.data(), logits.data(), rows, v);
    VectorCrossEntropySumExp(sum.data(), logits.data(), max.data(), rows, v);
    CrossEntropySumExp(expected_sum.data(), logits.data(), max.data(), rows, v);
    for (int64_t i = 0; i < rows; ++i) {
      ASSERT_TRUE(Close(sum[i], expected_sum[i], expected_sum[i], kSumExpUlps))
          << "row " << i << " of v " << v << ": " << sum[i] << " vs " << expected_sum[i];
    }
    // lse as the forward leaves it; targets: ignored, in these columns or not (first_column).
    std::vector<float> lse(rows);
    for (int64_t i = 0; i < rows; ++i) lse[i] = max[i] + std::log(expected_sum[i]);
    const int32_t targets[rows] = {
        0, kIgnoreIndex, static_cast<int32_t>(v / 2), 5, static_cast<int32_t>(v - 1), 3, 100000};
    for (int64_t first_column : {0, 2}) {
      std::vector<float> grad(rows * v), expected(rows * v), in_place = logits;
      VectorCrossEntropyBackward(grad.data(), logits.data(), lse.data(), targets, rows, v, 1.5f,
                                 first_column);
      CrossEntropyBackward(expected.data(), logits.data(), lse.data(), targets, rows, v, 1.5f,
                           first_column);
      VectorCrossEntropyBackward(in_place.data(), in_place.data(), lse.data(), targets, rows, v,
                                 1.5f, first_column);
      const float scale = CrossEntropyGradScale(targets, rows, 1.5f);
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t j = 0; j < v; ++j) {
          const int64_t at = i * v + j;
          const bool target = targets[i] != kIgnoreIndex && targets[i] - first_column == j;
          ASSERT_TRUE(Close(grad[at], expected[at], target ? scale : expected[at], kSoftmaxUlps))
              << "row " << i << ", column " << j << " of v " << v << ": " << grad[at] << " vs "
              << expected[at];
          ASSERT_TRUE(SameValue(in_place[at], grad[at])) << "in place, " << i << ", " << j;
        }
      }
    }
  }
}

// Head sizes around the vector widths (and 2, 6: pairs left over); positions' cos and sin from the
// table, with edge values in x.
TEST_P(VectorKernelsTest, RopeIsTheReferenceBitForBit) {
  const int64_t b = 2, t = 5, heads = 3;
  for (int64_t head_dim : {2, 6, 8, 14, 16, 30, 32, 34, 64, 66, 128}) {
    std::vector<float> cos(t * head_dim / 2), sin(t * head_dim / 2);
    RopeTable(cos.data(), sin.data(), t, head_dim, RopeConfig{}, 1000);
    const std::vector<float> x = MixedValues(b * t * heads * head_dim, 30);
    std::vector<float> forward = x, expected_forward = x;
    VectorRopeForward(forward.data(), cos.data(), sin.data(), b, t, heads, head_dim);
    RopeForward(expected_forward.data(), cos.data(), sin.data(), b, t, heads, head_dim);
    std::vector<float> backward = x, expected_backward = x;
    VectorRopeBackward(backward.data(), cos.data(), sin.data(), b, t, heads, head_dim);
    RopeBackward(expected_backward.data(), cos.data(), sin.data(), b, t, heads, head_dim);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_TRUE(SameValue(forward[i], expected_forward[i]))
          << "forward " << i << " of head_dim " << head_dim << ": " << forward[i] << " vs "
          << expected_forward[i];
      ASSERT_TRUE(SameValue(backward[i], expected_backward[i]))
          << "backward " << i << " of head_dim " << head_dim;
    }
  }
}

// The rotation itself, so that a reference and vector code wrong in the same way cannot pass: a
// quarter turn takes (1, 0) to (0, 1), and the backward turns it back.
TEST_P(VectorKernelsTest, RopeTurnsEachPairByItsAngle) {
  const int64_t head_dim = 36, half = head_dim / 2;
  std::vector<float> cos(half, 0.0f), sin(half, 1.0f), x(head_dim);
  for (int64_t i = 0; i < half; ++i) x[2 * i] = static_cast<float>(i + 1), x[2 * i + 1] = 0.0f;
  std::vector<float> turned = x;
  VectorRopeForward(turned.data(), cos.data(), sin.data(), 1, 1, 1, head_dim);
  for (int64_t i = 0; i < half; ++i) {
    EXPECT_EQ(turned[2 * i], 0.0f) << i;
    EXPECT_EQ(turned[2 * i + 1], static_cast<float>(i + 1)) << i;
  }
  VectorRopeBackward(turned.data(), cos.data(), sin.data(), 1, 1, 1, head_dim);
  for (int64_t i = 0; i < head_dim; ++i) EXPECT_EQ(turned[i], x[i]) << i;
}

INSTANTIATE_TEST_SUITE_P(EachTarget, VectorKernelsTest,
                         ::testing::ValuesIn(hwy::SupportedAndGeneratedTargets()),
                         [](const ::testing::TestParamInfo<int64_t>& info) {
                           return std::string(hwy::TargetName(info.param));
                         });

}  // namespace
}  // namespace titan
