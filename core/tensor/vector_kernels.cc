// Highway compiles this file once per instruction set (foreach_target.h includes it again for
// each); the part under HWY_ONCE is compiled once and dispatches on the CPU found.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/tensor/vector_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// clang-format off: highway.h must follow foreach_target.h.
#include "hwy/highway.h"
// clang-format on

#include <algorithm>
#include <cstdint>

#include "core/tensor/adam.h"
#include "core/tensor/vector_kernels.h"
#include "titan/float16.h"

HWY_BEFORE_NAMESPACE();
namespace titan {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

int64_t ThisTarget() { return HWY_TARGET; }

#if HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128
// Without SSSE3 Highway emulates its vectors lane by lane, 2-4x slower than the compiler's own SSE2
// loops over the scalar references (titan_cpu_kernels_bench), so on such CPUs those run.
void CastF32ToBf16Span(const float* in, uint16_t* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = F32ToBf16(in[i]);
}

void CastBf16ToF32Span(const uint16_t* in, float* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = Bf16ToF32(in[i]);
}

void AdamUpdateSpan(const AdamConstants& c, float* param, const float* grad, float* m, float* v,
                    int64_t n) {
  ScalarAdamUpdate(c, param, grad, m, v, n);
}
#else

// titan/float16.h's F32ToBf16, lane by lane: both results, then the select.
void CastF32ToBf16Span(const float* in, uint16_t* out, int64_t n) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<uint16_t, decltype(df)> d16;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  const auto quiet_bit = hn::Set(du, 0x40u);
  const auto round_bias = hn::Set(du, 0x7fffu);
  const auto one = hn::Set(du, 1u);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto value = hn::LoadU(df, in + i);
    const auto bits = hn::BitCast(du, value);
    const auto high = hn::ShiftRight<16>(bits);
    const auto quiet_nan = hn::Or(high, quiet_bit);
    const auto rounded = hn::ShiftRight<16>(hn::Add(hn::Add(bits, round_bias), hn::And(high, one)));
    const auto result = hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(value)), quiet_nan, rounded);
    // Every lane is below 2^16, so the saturating narrowing keeps it as it is.
    hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, result)), d16, out + i);
  }
  for (; i < n; ++i) out[i] = F32ToBf16(in[i]);
}

void CastBf16ToF32Span(const uint16_t* in, float* out, int64_t n) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const hn::Rebind<uint16_t, decltype(df)> d16;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto wide = hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(d16, in + i)));
    hn::StoreU(hn::BitCast(df, wide), df, out + i);
  }
  for (; i < n; ++i) out[i] = Bf16ToF32(in[i]);
}

// adam.h's AdamElement, lane by lane, operation for operation.
void AdamUpdateSpan(const AdamConstants& c, float* param, const float* grad, float* m, float* v,
                    int64_t n) {
  const hn::ScalableTag<float> df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  const auto beta1 = hn::Set(df, c.beta1), one_minus_beta1 = hn::Set(df, c.one_minus_beta1);
  const auto beta2 = hn::Set(df, c.beta2), one_minus_beta2 = hn::Set(df, c.one_minus_beta2);
  const auto step_size = hn::Set(df, c.step_size);
  const auto bias_correction2_sqrt = hn::Set(df, c.bias_correction2_sqrt);
  const auto eps = hn::Set(df, c.eps), decay = hn::Set(df, c.decay);
  const auto decoupled_scale = hn::Set(df, c.decoupled_scale);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    auto p = hn::LoadU(df, param + i);
    auto g = hn::LoadU(df, grad + i);
    if (c.decoupled) {
      p = hn::Mul(p, decoupled_scale);
    } else {
      g = hn::Add(g, hn::Mul(decay, p));
    }
    const auto m_new = hn::Add(hn::Mul(beta1, hn::LoadU(df, m + i)), hn::Mul(one_minus_beta1, g));
    const auto v_new =
        hn::Add(hn::Mul(beta2, hn::LoadU(df, v + i)), hn::Mul(hn::Mul(one_minus_beta2, g), g));
    const auto denom = hn::Add(hn::Div(hn::Sqrt(v_new), bias_correction2_sqrt), eps);
    p = hn::Sub(p, hn::Div(hn::Mul(step_size, m_new), denom));
    hn::StoreU(m_new, df, m + i);
    hn::StoreU(v_new, df, v + i);
    hn::StoreU(p, df, param + i);
  }
  ScalarAdamUpdate(c, param + i, grad + i, m + i, v + i, n - i);
}
#endif  // HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128

}  // namespace HWY_NAMESPACE
}  // namespace titan
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace titan {
namespace {

HWY_EXPORT(ThisTarget);
HWY_EXPORT(CastF32ToBf16Span);
HWY_EXPORT(CastBf16ToF32Span);
HWY_EXPORT(AdamUpdateSpan);

// Runs span(begin, count) over [0, n) in blocks shared among the OpenMP threads; a block is small
// enough to stay in L2 and large enough that the parallel loop costs nothing beside it.
template <typename Span>
void ForEachBlock(int64_t n, const Span& span) {
  constexpr int64_t kBlock = int64_t{1} << 14;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (int64_t b = 0; b < blocks; ++b) span(b * kBlock, std::min(kBlock, n - b * kBlock));
}

}  // namespace

const char* VectorKernelsTarget() { return hwy::TargetName(HWY_DYNAMIC_DISPATCH(ThisTarget)()); }

void VectorCastF32ToBf16(const float* in, uint16_t* out, int64_t n) {
  ForEachBlock(n, [&](int64_t begin, int64_t count) {
    HWY_DYNAMIC_DISPATCH(CastF32ToBf16Span)(in + begin, out + begin, count);
  });
}

void VectorCastBf16ToF32(const uint16_t* in, float* out, int64_t n) {
  ForEachBlock(n, [&](int64_t begin, int64_t count) {
    HWY_DYNAMIC_DISPATCH(CastBf16ToF32Span)(in + begin, out + begin, count);
  });
}

void VectorAdamUpdate(const AdamConstants& c, float* param, const float* grad, float* m, float* v,
                      int64_t n) {
  ForEachBlock(n, [&](int64_t begin, int64_t count) {
    HWY_DYNAMIC_DISPATCH(AdamUpdateSpan)
    (c, param + begin, grad + begin, m + begin, v + begin, count);
  });
}

}  // namespace titan
#endif  // HWY_ONCE
