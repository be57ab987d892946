// Every vector kernel against its scalar reference, bit for bit, on each instruction set this CPU
// runs (Highway's dispatch forced to one at a time): random inputs, edge values (NaN, inf,
// denormals, rounding ties) and sizes that are no multiple of any vector width.
#include "core/tensor/vector_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/tensor/adam.h"
#include "hwy/targets.h"
#include "titan/float16.h"

namespace titan {
namespace {

// Sizes around the vector widths (4, 8, 16 f32 lanes) and past one 16384-element block.
const int64_t kSizes[] = {0, 1, 3, 4, 7, 8, 15, 16, 17, 31, 33, 1000, 16384 + 5, 3 * 16384 + 7};

uint32_t Bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
}

float FromBits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

// Same bits, or both NaN: x86 picks which NaN operand's payload survives by operand order, which
// the compiler may swap in commutative operations, so only NaN-ness is the contract there.
bool SameValue(float a, float b) { return Bits(a) == Bits(b) || (std::isnan(a) && std::isnan(b)); }

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

class VectorKernelsTest : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override {
    hwy::SetSupportedTargetsForTest(GetParam());
    hwy::GetChosenTarget().Update(hwy::SupportedTargets());
  }
  void TearDown() override {
    hwy::SetSupportedTargetsForTest(0);
    hwy::GetChosenTarget().Update(hwy::SupportedTargets());
  }
};

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

INSTANTIATE_TEST_SUITE_P(EachTarget, VectorKernelsTest,
                         ::testing::ValuesIn(hwy::SupportedAndGeneratedTargets()),
                         [](const ::testing::TestParamInfo<int64_t>& info) {
                           return std::string(hwy::TargetName(info.param));
                         });

}  // namespace
}  // namespace titan
