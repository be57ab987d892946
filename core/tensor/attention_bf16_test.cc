#include "core/tensor/attention_bf16.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "core/tensor/bf16_gemm.h"
#include "core/tensor/internal/grad_check.h"

namespace titan {
namespace {

std::vector<float> RandomFloats(int64_t n, uint32_t seed) {
  const std::vector<double> x = internal::RandomVector(n, seed);
  return std::vector<float>(x.begin(), x.end());
}

// One kernel's outputs: the forward's out and lse, the backward's gradients.
struct Results {
  std::vector<float> out, lse, dq, dk, dv;
};

struct Inputs {
  AttentionShape s;
  std::vector<float> q, k, v, dout;
  explicit Inputs(const AttentionShape& shape) : s(shape) {
    const int64_t q_size = s.batch * s.seq_len * s.heads * s.head_dim;
    const int64_t kv_size = s.batch * s.keys() * s.kv_heads * s.head_dim;
    q = RandomFloats(q_size, 1), k = RandomFloats(kv_size, 2), v = RandomFloats(kv_size, 3);
    dout = RandomFloats(q_size, 4);
  }
  Results Empty() const {
    return {std::vector<float>(q.size()), std::vector<float>(s.batch * s.heads * s.seq_len),
            std::vector<float>(q.size()), std::vector<float>(k.size()),
            std::vector<float>(v.size())};
  }
  Results F32() const {
    Results r = Empty();
    AttentionForward(r.out.data(), r.lse.data(), q.data(), k.data(), v.data(), s);
    AttentionBackward(r.dq.data(), r.dk.data(), r.dv.data(), dout.data(), q.data(), k.data(),
                      v.data(), r.out.data(), r.lse.data(), s);
    return r;
  }
  // The backward takes the f32 forward's out and lse, so that only its own rounding shows.
  Results Bf16(Bf16GemmFunction gemm = nullptr) const {
    Results r = Empty();
    const Results f32 = F32();
    EXPECT_TRUE(
        AttentionForwardBf16(r.out.data(), r.lse.data(), q.data(), k.data(), v.data(), s, gemm)
            .ok());
    EXPECT_TRUE(AttentionBackwardBf16(r.dq.data(), r.dk.data(), r.dv.data(), dout.data(), q.data(),
                                      k.data(), v.data(), f32.out.data(), f32.lse.data(), s, gemm)
                    .ok());
    return r;
  }
};

// max |a - b| over max |b|, skipping the -inf of rows that see no key (which must agree).
double ScaledError(const std::vector<float>& a, const std::vector<float>& b) {
  double error = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(b[i])) {
      EXPECT_EQ(a[i], b[i]) << i;
      continue;
    }
    error = std::max(error, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return scale > 0 ? error / scale : error;
}

// Each bf16 rounding is a relative error of at most u = 2^-9 (round to nearest even) in q, k, v,
// dout, p and ds. They reach each output at first order, with random signs over the hd (or keys)
// terms of a sum, so on unit-normal inputs an output's error is a few u times the outputs'
// magnitude; the gradients' more, because ds = p (dp - D) cancels. Measured over these shapes:
// out at most 4.1e-3 of its largest magnitude, dq 7.8e-3, dk 9.9e-3, dv 7.1e-3. The bound
// 2.5e-2 (12.8u) leaves a factor of 2.5.
constexpr double kOutputBound = 2.5e-2;

// lse_i = log sum_j exp(s_ij) moves by at most max_j |ds_ij|, and rounding q and k moves a score
// by at most (2u + u^2) scale sum_d |q_id k_jd|: a bound computed from the inputs, row by row, with
// 1e-5 of slack for the f32 sums (measured up to 1.1e-2 absolute where hd is 8).
double LseBound(const Inputs& in, int64_t b, int64_t h, int64_t i) {
  const AttentionShape& s = in.s;
  const double u = std::ldexp(1.0, -9), scale = 1 / std::sqrt(static_cast<double>(s.head_dim));
  const int64_t kvh = h / (s.heads / s.kv_heads);
  double worst = 0;
  for (int64_t j = 0; j < s.visible(i); ++j) {
    double sum = 0;
    for (int64_t d = 0; d < s.head_dim; ++d) {
      sum += std::fabs(in.q[((b * s.seq_len + i) * s.heads + h) * s.head_dim + d] *
                       in.k[((b * s.keys() + j) * s.kv_heads + kvh) * s.head_dim + d]);
    }
    worst = std::max(worst, sum);
  }
  return (2 * u + u * u) * scale * worst + 1e-5;
}

class AttentionBf16Test : public testing::TestWithParam<AttentionShape> {};

TEST_P(AttentionBf16Test, AgreesWithTheF32KernelWithinBf16Rounding) {
  const Inputs in(GetParam());
  const Results f32 = in.F32(), bf16 = in.Bf16();
  const double out = ScaledError(bf16.out, f32.out), dq = ScaledError(bf16.dq, f32.dq);
  const double dk = ScaledError(bf16.dk, f32.dk), dv = ScaledError(bf16.dv, f32.dv);
  double lse = 0;  // the largest error as a fraction of its row's bound
  const AttentionShape& s = in.s;
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      for (int64_t i = 0; i < s.seq_len; ++i) {
        const int64_t at = (b * s.heads + h) * s.seq_len + i;
        if (std::isinf(f32.lse[at])) {
          EXPECT_EQ(bf16.lse[at], f32.lse[at]) << at;
        } else {
          const double error = std::fabs(static_cast<double>(bf16.lse[at]) - f32.lse[at]);
          lse = std::max(lse, error / LseBound(in, b, h, i));
        }
      }
    }
  }
  std::printf("bf16 against f32: out %.2g lse %.2g of its bound, dq %.2g dk %.2g dv %.2g\n", out,
              lse, dq, dk, dv);
  EXPECT_LT(out, kOutputBound);
  EXPECT_LE(lse, 1.0);
  EXPECT_LT(dq, kOutputBound);
  EXPECT_LT(dk, kOutputBound);
  EXPECT_LT(dv, kOutputBound);
  // Not trivially equal: the rounding shows.
  EXPECT_NE(bf16.out, f32.out);
}

// The 34M model's head (64) on a short sequence; grouped heads; lengths that cross the 32-row
// tiles without filling them; context parallel chunks: queries after keys they see all of
// (shift 37), and queries before any key (shift -5: the first 5 rows see none).
INSTANTIATE_TEST_SUITE_P(Shapes, AttentionBf16Test,
                         testing::Values(AttentionShape{2, 64, 2, 2, 64},
                                         AttentionShape{2, 37, 4, 1, 16},
                                         AttentionShape{1, 67, 4, 2, 8},
                                         AttentionShape{2, 33, 4, 2, 32, 70, 37},
                                         AttentionShape{1, 40, 4, 2, 16, 20, -5}));

TEST(AttentionBf16, RowsThatSeeNoKeyGetZerosAndNoGradient) {
  const Inputs in(AttentionShape{1, 40, 4, 2, 16, 20, -5});
  const Results r = in.Bf16();
  const AttentionShape& s = in.s;
  for (int64_t i = 0; i < 5; ++i) {
    for (int64_t h = 0; h < s.heads; ++h) {
      EXPECT_EQ(r.lse[h * s.seq_len + i], -std::numeric_limits<float>::infinity());
      for (int64_t d = 0; d < s.head_dim; ++d) {
        const int64_t at = (i * s.heads + h) * s.head_dim + d;
        EXPECT_EQ(r.out[at], 0.0f);
        EXPECT_EQ(r.dq[at], 0.0f);
      }
    }
  }
}

// oneDNN's bf16 kernel and the emulation multiply the same bf16 numbers exactly and sum them in
// f32 in different orders: about 1e-7 relative, except where that moves a probability or a ds
// across a bf16 rounding boundary, which changes that entry by one bf16 step (2^-8 relative).
// Measured at most 8.2e-6 of the largest magnitude (dq); a flip costs at most 2^-8 of the entry's
// share of a sum, hence the bound 2e-3. On a CPU without bf16 instructions both are the emulation
// and agree exactly.
TEST(AttentionBf16, OneDnnAndTheEmulationAgree) {
  const Inputs in(AttentionShape{2, 70, 4, 2, 64, 90, 20});
  const Results native = in.Bf16(), emulated = in.Bf16(EmulatedBf16Gemm);
  std::printf("bf16 GEMM %s\n", Bf16GemmPath().c_str());
  constexpr double kBound = 2e-3;
  const double errors[] = {ScaledError(native.out, emulated.out),
                           ScaledError(native.lse, emulated.lse),
                           ScaledError(native.dq, emulated.dq), ScaledError(native.dk, emulated.dk),
                           ScaledError(native.dv, emulated.dv)};
  std::printf("against the emulation: out %.2g lse %.2g dq %.2g dk %.2g dv %.2g\n", errors[0],
              errors[1], errors[2], errors[3], errors[4]);
  for (double error : errors) EXPECT_LT(error, kBound);
}

TEST(AttentionBf16, BackwardIsBitIdenticalForAnyThreadCount) {
  const Inputs in(AttentionShape{2, 70, 4, 2, 8});
  auto gradients = [&](int threads) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    const Results r = in.Bf16();
    omp_set_num_threads(saved);
    return r;
  };
  const Results one = gradients(1), two = gradients(2), three = gradients(3);
  EXPECT_EQ(one.dq, two.dq);
  EXPECT_EQ(one.dk, two.dk);
  EXPECT_EQ(one.dv, two.dv);
  EXPECT_EQ(one.dq, three.dq);
  EXPECT_EQ(one.dk, three.dk);
  EXPECT_EQ(one.dv, three.dv);
}

}  // namespace
}  // namespace titan
