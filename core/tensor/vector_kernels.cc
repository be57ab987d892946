// Highway compiles this file once per instruction set (foreach_target.h includes it again for
// each); the part under HWY_ONCE is compiled once and dispatches on the CPU found.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/tensor/vector_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// clang-format off: highway.h must follow foreach_target.h.
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
// clang-format on

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/tensor/adam.h"
#include "core/tensor/cross_entropy.h"
#include "core/tensor/internal/columns.h"
#include "core/tensor/internal/vector_math.h"
#include "core/tensor/rmsnorm.h"
#include "core/tensor/rope.h"
#include "core/tensor/sgd.h"
#include "core/tensor/swiglu.h"
#include "core/tensor/vector_kernels.h"
#include "titan/float16.h"

HWY_BEFORE_NAMESPACE();
namespace titan {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

int64_t ThisTarget() { return HWY_TARGET; }

constexpr int64_t kMaxLanes = HWY_MAX_BYTES / sizeof(float);

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

void SgdUpdateSpan(const SgdConstants& c, float* param, const float* grad, float* buffer,
                   int64_t n) {
  ScalarSgdUpdate(c, param, grad, buffer, n);
}

float RmsNormForwardRowSpan(float* y, const float* x, const float* weight, int64_t c, double eps) {
  return RmsNormForwardRow(y, x, weight, c, eps);
}

void RmsNormBackwardRowSpan(float* dx, const float* dy, const float* x, const float* weight,
                            float r, int64_t c) {
  RmsNormBackwardRow(dx, dy, x, weight, r, c);
}

void RmsNormWeightGradSpan(float* dweight, const float* dout, const float* inp, const float* rstd,
                           int64_t n, int64_t c, int64_t begin, int64_t end) {
  RmsNormWeightGradColumns(dweight, dout, inp, rstd, n, c, begin, end);
}

void RopeHeadsSpan(float* x, const float* cos, const float* sin, int64_t heads, int64_t head_dim,
                   float direction) {
  RopeRotateHeads(x, cos, sin, heads, head_dim, direction);
}

float RowMaxSpan(const float* row, int64_t v) { return CrossEntropyRowMaxOf(row, v); }

double SumOfSquaresSpan(const float* x, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  return sum;
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

// sgd.h's SgdElement, lane by lane, operation for operation.
void SgdUpdateSpan(const SgdConstants& c, float* param, const float* grad, float* buffer,
                   int64_t n) {
  const hn::ScalableTag<float> df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  const auto lr = hn::Set(df, c.lr), decay = hn::Set(df, c.decay);
  const auto momentum = hn::Set(df, c.momentum), keep = hn::Set(df, c.keep);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto p = hn::LoadU(df, param + i);
    auto g = hn::LoadU(df, grad + i);
    if (c.has_decay) g = hn::Add(g, hn::Mul(decay, p));
    if (c.has_momentum) {
      const auto b =
          c.first ? g : hn::Add(hn::Mul(momentum, hn::LoadU(df, buffer + i)), hn::Mul(keep, g));
      hn::StoreU(b, df, buffer + i);
      g = c.nesterov ? hn::Add(g, hn::Mul(momentum, b)) : b;
    }
    hn::StoreU(hn::Sub(p, hn::Mul(lr, g)), df, param + i);
  }
  ScalarSgdUpdate(c, param + i, grad + i, c.has_momentum ? buffer + i : nullptr, n - i);
}

// Sums of products in double: each f32 vector's halves widened (PromoteLow, PromoteHigh),
// multiplied and added to two accumulators, reduced across lanes at the end (Total); the tail
// follows in order, as in the reference.
template <class DF>
hn::Vec<hn::Repartition<double, DF> > PromoteLow(DF, hn::Vec<DF> v) {
  return hn::PromoteTo(hn::Repartition<double, DF>(), hn::LowerHalf(hn::Half<DF>(), v));
}

template <class DF>
hn::Vec<hn::Repartition<double, DF> > PromoteHigh(DF, hn::Vec<DF> v) {
  return hn::PromoteTo(hn::Repartition<double, DF>(), hn::UpperHalf(hn::Half<DF>(), v));
}

template <class DD>
double Total(DD dd, hn::Vec<DD> low, hn::Vec<DD> high) {
  return hn::GetLane(hn::SumOfLanes(dd, hn::Add(low, high)));
}

// The sum of x[i]^2 in double, each square exact: two accumulators of widened halves, then the
// tail in order.
double SumOfSquaresSpan(const float* x, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const hn::Repartition<double, decltype(d)> dd;
  auto low = hn::Zero(dd), high = hn::Zero(dd);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto v = hn::LoadU(d, x + i);
    const auto v_low = PromoteLow(d, v), v_high = PromoteHigh(d, v);
    low = hn::Add(low, hn::Mul(v_low, v_low));
    high = hn::Add(high, hn::Mul(v_high, v_high));
  }
  double sum = Total(dd, low, high);
  for (; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  return sum;
}

// rmsnorm.h's RmsNormForwardRow: the sum of squares in another order, the rest lane by lane.
float RmsNormForwardRowSpan(float* y, const float* x, const float* weight, int64_t c, double eps) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const float r = static_cast<float>(1.0 / std::sqrt(SumOfSquaresSpan(x, c) / c + eps));
  const auto vr = hn::Set(d, r);
  int64_t j = 0;
  for (; j + lanes <= c; j += lanes) {
    hn::StoreU(hn::Mul(hn::Mul(hn::LoadU(d, x + j), vr), hn::LoadU(d, weight + j)), d, y + j);
  }
  for (; j < c; ++j) y[j] = x[j] * r * weight[j];
  return r;
}

// rmsnorm.h's RmsNormBackwardRow: the dot product in another order, the rest lane by lane.
void RmsNormBackwardRowSpan(float* dx, const float* dy, const float* x, const float* weight,
                            float r, int64_t c) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const hn::Repartition<double, decltype(d)> dd;
  auto sum_low = hn::Zero(dd), sum_high = hn::Zero(dd);
  int64_t j = 0;
  for (; j + lanes <= c; j += lanes) {
    const auto w = hn::LoadU(d, weight + j), g = hn::LoadU(d, dy + j), v = hn::LoadU(d, x + j);
    const auto low = hn::Mul(hn::Mul(PromoteLow(d, w), PromoteLow(d, g)), PromoteLow(d, v));
    const auto high = hn::Mul(hn::Mul(PromoteHigh(d, w), PromoteHigh(d, g)), PromoteHigh(d, v));
    sum_low = hn::Add(sum_low, low);
    sum_high = hn::Add(sum_high, high);
  }
  double dot = Total(dd, sum_low, sum_high);
  for (; j < c; ++j) dot += static_cast<double>(weight[j]) * dy[j] * x[j];
  const float coefficient = static_cast<float>(dot / c) * r * r;
  const auto vr = hn::Set(d, r), vcoefficient = hn::Set(d, coefficient);
  j = 0;
  for (; j + lanes <= c; j += lanes) {
    const auto g = hn::Mul(hn::LoadU(d, weight + j), hn::LoadU(d, dy + j));
    const auto grad = hn::Mul(vr, hn::Sub(g, hn::Mul(hn::LoadU(d, x + j), vcoefficient)));
    hn::StoreU(hn::Add(hn::LoadU(d, dx + j), grad), d, dx + j);
  }
  for (; j < c; ++j) dx[j] += r * (weight[j] * dy[j] - x[j] * coefficient);
}

// rmsnorm.h's RmsNormWeightGradColumns: each column's sum in row order, as there, so the same bits;
// the chunk's columns stay in registers across the rows.
void RmsNormWeightGradSpan(float* dweight, const float* dout, const float* inp, const float* rstd,
                           int64_t n, int64_t c, int64_t begin, int64_t end) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const int64_t vectors = (end - begin) / lanes;
  constexpr int64_t kMaxVectors = internal::kColumnChunk / 4;  // SSSE3's 4 lanes
  hn::Vec<decltype(d)> sums[kMaxVectors];
  for (int64_t k = 0; k < vectors; ++k) sums[k] = hn::LoadU(d, dweight + begin + k * lanes);
  for (int64_t i = 0; i < n; ++i) {
    const auto r = hn::Set(d, rstd[i]);
    const float* dy = dout + i * c + begin;
    const float* x = inp + i * c + begin;
    for (int64_t k = 0; k < vectors; ++k) {
      const auto term =
          hn::Mul(hn::Mul(hn::LoadU(d, dy + k * lanes), hn::LoadU(d, x + k * lanes)), r);
      sums[k] = hn::Add(sums[k], term);
    }
  }
  for (int64_t k = 0; k < vectors; ++k) hn::StoreU(sums[k], d, dweight + begin + k * lanes);
  RmsNormWeightGradColumns(dweight, dout, inp, rstd, n, c, begin + vectors * lanes, end);
}

// [c0, c0, c1, c1, ...] from lanes / 2 values at p: each widened to 64 bits and copied up.
template <class D>
hn::Vec<D> LoadPairwise(D d, const float* p) {
  const hn::Repartition<uint64_t, D> d64;
  const hn::Rebind<float, decltype(d64)> dhalf;
  const hn::Rebind<uint32_t, decltype(d64)> dhalf_bits;
  const auto wide = hn::PromoteTo(d64, hn::BitCast(dhalf_bits, hn::LoadU(dhalf, p)));
  return hn::BitCast(d, hn::Or(wide, hn::ShiftLeft<32>(wide)));
}

// rope.h's RopeRotateHeads: with x = [re, im, ...] and its pairs swapped [im, re, ...], out =
// x * [c, c] + swapped * [-si, si]: re * c + im * -si is re * c - im * si, im * c + re * si
// is re * si + im * c, bit for bit.
void RopeHeadsSpan(float* x, const float* cos, const float* sin, int64_t heads, int64_t head_dim,
                   float direction) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const hn::Repartition<uint64_t, decltype(d)> d64;
  // The sign bit of each pair's first lane.
  const auto even_sign = hn::BitCast(d, hn::Set(d64, uint64_t{0x80000000u}));
  const auto vdirection = hn::Set(d, direction);
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < heads; ++h) {
    float* pair = x + h * head_dim;
    int64_t i = 0;
    for (; 2 * i + lanes <= 2 * half; i += lanes / 2) {
      const auto c = LoadPairwise(d, cos + i);
      const auto s = hn::Xor(hn::Mul(LoadPairwise(d, sin + i), vdirection), even_sign);
      const auto v = hn::LoadU(d, pair + 2 * i);
      hn::StoreU(hn::Add(hn::Mul(v, c), hn::Mul(hn::Shuffle2301(v), s)), d, pair + 2 * i);
    }
    if (i < half) RopeRotateHeads(pair + 2 * i, cos + i, sin + i, 1, 2 * (half - i), direction);
  }
}

// cross_entropy.h's CrossEntropyRowMaxOf lane by lane (a lane takes x where x > its maximum, so
// NaNs are passed over unless row[0] is one), in four accumulators so that the compares do not
// wait on each other, then the accumulators and their lanes folded in the same way.
float RowMaxSpan(const float* row, int64_t v) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  float top = row[0];
  int64_t j = 1;
  if (j + lanes <= v) {
    const auto keep_larger = [](auto x, auto m) { return hn::IfThenElse(hn::Gt(x, m), x, m); };
    auto m0 = hn::Set(d, top), m1 = m0, m2 = m0, m3 = m0;
    for (; j + 4 * lanes <= v; j += 4 * lanes) {
      m0 = keep_larger(hn::LoadU(d, row + j), m0);
      m1 = keep_larger(hn::LoadU(d, row + j + lanes), m1);
      m2 = keep_larger(hn::LoadU(d, row + j + 2 * lanes), m2);
      m3 = keep_larger(hn::LoadU(d, row + j + 3 * lanes), m3);
    }
    for (; j + lanes <= v; j += lanes) m0 = keep_larger(hn::LoadU(d, row + j), m0);
    m0 = keep_larger(m1, keep_larger(m2, keep_larger(m3, m0)));
    HWY_ALIGN float lane_max[kMaxLanes];
    hn::Store(m0, d, lane_max);
    for (int64_t k = 0; k < lanes; ++k) top = lane_max[k] > top ? lane_max[k] : top;
  }
  for (; j < v; ++j) top = row[j] > top ? row[j] : top;
  return top;
}

#endif  // HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128

#if HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128 || HWY_TARGET == HWY_SSSE3 || \
    HWY_TARGET == HWY_SSE4
// Highway's Exp on the 128-bit targets (no FMA there: each multiply-add is two operations) is
// 1.7-2x slower than glibc's SSE4 vector expf that the references' `omp simd` loops call
// (titan_cpu_kernels_bench), so on CPUs without AVX2 the kernels that take an exp run those.
void ExpSpan(const float* in, float* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = internal::VectorExp(in[i]);
}

void SwiGluForwardSpan(float* out, const float* a, const float* b, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = SwiGluElement(a[i], b[i]);
}

void SwiGluBackwardSpan(float* da, float* db, const float* dout, const float* a, const float* b,
                        int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) SwiGluBackwardElement(da[i], db[i], dout[i], a[i], b[i]);
}

float SumExpRowSpan(const float* row, float shift, int64_t v) {
  return CrossEntropySumExpRow(row, shift, v);
}

void SoftmaxRowSpan(float* grad, const float* row, float lse, float scale, int64_t v) {
  CrossEntropySoftmaxRow(grad, row, lse, scale, v);
}

#else

// Highway's Exp (1 ulp on [-104, 88.7] as documented) with expf's answers outside that range: NaN
// stays NaN, +inf from where expf overflows, and below -104 Highway's 0 is already expf's.
template <class D, class V = hn::Vec<D> >
V ExpOf(D d, V x) {
  const V y = hn::Exp(d, x);
  // The smallest f32 whose exp exceeds FLT_MAX, 0x42b17218.
  const auto overflow = hn::Ge(x, hn::Set(d, 88.72283935546875f));
  const V inf = hn::Set(d, std::numeric_limits<float>::infinity());
  return hn::IfThenElse(hn::IsNaN(x), x, hn::IfThenElse(overflow, inf, y));
}

// body(in, out) on each whole vector of n elements (in and out pointing at it), then once on the
// last n % lanes through copies padded with zeros: each element's result is then the same
// wherever it sits, in the body or the tail of a thread's block or of a tensor-parallel shard.
template <size_t kIn, size_t kOut, class D, class Body>
void ForEachVector(D d, int64_t n, const std::array<const float*, kIn>& in,
                   const std::array<float*, kOut>& out, const Body& body) {
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  std::array<const float*, kIn> in_at;
  std::array<float*, kOut> out_at;
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    for (size_t k = 0; k < kIn; ++k) in_at[k] = in[k] + i;
    for (size_t k = 0; k < kOut; ++k) out_at[k] = out[k] + i;
    body(in_at, out_at);
  }
  const int64_t rest = n - i;
  if (rest == 0) return;
  HWY_ALIGN float in_copy[kIn][kMaxLanes] = {};
  HWY_ALIGN float out_copy[kOut][kMaxLanes] = {};
  for (size_t k = 0; k < kIn; ++k) in_at[k] = std::copy_n(in[k] + i, rest, in_copy[k]) - rest;
  for (size_t k = 0; k < kOut; ++k) out_at[k] = std::copy_n(out[k] + i, rest, out_copy[k]) - rest;
  body(in_at, out_at);
  for (size_t k = 0; k < kOut; ++k) std::copy_n(out_copy[k], rest, out[k] + i);
}

void ExpSpan(const float* in, float* out, int64_t n) {
  const hn::ScalableTag<float> d;
  ForEachVector<1, 1>(d, n, {in}, {out}, [&](const auto& x, const auto& y) {
    hn::StoreU(ExpOf(d, hn::LoadU(d, x[0])), d, y[0]);
  });
}

// swiglu.h's SwiGluElement, lane by lane, operation for operation, with ExpOf for expf.
void SwiGluForwardSpan(float* out, const float* a, const float* b, int64_t n) {
  const hn::ScalableTag<float> d;
  const auto one = hn::Set(d, 1.0f);
  ForEachVector<2, 1>(d, n, {a, b}, {out}, [&](const auto& x, const auto& y) {
    const auto va = hn::LoadU(d, x[0]);
    const auto gate = hn::Div(va, hn::Add(one, ExpOf(d, hn::Neg(va))));
    hn::StoreU(hn::Mul(gate, hn::LoadU(d, x[1])), d, y[0]);
  });
}

// swiglu.h's SwiGluBackwardElement, likewise.
void SwiGluBackwardSpan(float* da, float* db, const float* dout, const float* a, const float* b,
                        int64_t n) {
  const hn::ScalableTag<float> d;
  const auto one = hn::Set(d, 1.0f);
  ForEachVector<3, 2>(d, n, {dout, a, b}, {da, db}, [&](const auto& x, const auto& y) {
    const auto vdout = hn::LoadU(d, x[0]), va = hn::LoadU(d, x[1]), vb = hn::LoadU(d, x[2]);
    const auto sigmoid = hn::Div(one, hn::Add(one, ExpOf(d, hn::Neg(va))));
    const auto silu = hn::Mul(va, sigmoid);
    const auto slope = hn::Add(one, hn::Mul(va, hn::Sub(one, sigmoid)));
    const auto grad_a = hn::Mul(hn::Mul(hn::Mul(vdout, vb), sigmoid), slope);
    hn::StoreU(hn::Add(hn::LoadU(d, y[0]), grad_a), d, y[0]);
    hn::StoreU(hn::Add(hn::LoadU(d, y[1]), hn::Mul(vdout, silu)), d, y[1]);
  });
}

// cross_entropy.h's CrossEntropySumExpRow with ExpOf, the sum in another order; the tail's padding
// lanes are left out of the sum (exp(0 - shift) need not be 0).
float SumExpRowSpan(const float* row, float shift, int64_t v) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto vshift = hn::Set(d, shift);
  const hn::Repartition<double, decltype(d)> dd;
  auto sum_low = hn::Zero(dd), sum_high = hn::Zero(dd);
  auto add = [&](hn::Vec<decltype(d)> e) {
    sum_low = hn::Add(sum_low, PromoteLow(d, e));
    sum_high = hn::Add(sum_high, PromoteHigh(d, e));
  };
  int64_t j = 0;
  for (; j + lanes <= v; j += lanes) add(ExpOf(d, hn::Sub(hn::LoadU(d, row + j), vshift)));
  if (j < v) {
    HWY_ALIGN float copy[kMaxLanes] = {};
    std::copy(row + j, row + v, copy);
    const auto e = ExpOf(d, hn::Sub(hn::Load(d, copy), vshift));
    add(hn::IfThenElseZero(hn::FirstN(d, static_cast<size_t>(v - j)), e));
  }
  return static_cast<float>(Total(dd, sum_low, sum_high));
}

// cross_entropy.h's CrossEntropySoftmaxRow with ExpOf; grad may be row itself.
void SoftmaxRowSpan(float* grad, const float* row, float lse, float scale, int64_t v) {
  const hn::ScalableTag<float> d;
  const auto vlse = hn::Set(d, lse), vscale = hn::Set(d, scale);
  ForEachVector<1, 1>(d, v, {row}, {grad}, [&](const auto& x, const auto& y) {
    hn::StoreU(hn::Mul(ExpOf(d, hn::Sub(hn::LoadU(d, x[0]), vlse)), vscale), d, y[0]);
  });
}
#endif  // the kernels that take an exp

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
HWY_EXPORT(SgdUpdateSpan);
HWY_EXPORT(ExpSpan);
HWY_EXPORT(SwiGluForwardSpan);
HWY_EXPORT(SwiGluBackwardSpan);
HWY_EXPORT(RmsNormForwardRowSpan);
HWY_EXPORT(RmsNormBackwardRowSpan);
HWY_EXPORT(RmsNormWeightGradSpan);
HWY_EXPORT(SumExpRowSpan);
HWY_EXPORT(SoftmaxRowSpan);
HWY_EXPORT(RopeHeadsSpan);
HWY_EXPORT(RowMaxSpan);
HWY_EXPORT(SumOfSquaresSpan);

// Each position's heads, positions shared among the threads.
void RopeRotate(float* x, const float* cos, const float* sin, int64_t b, int64_t t, int64_t heads,
                int64_t head_dim, float direction) {
  const int64_t half = head_dim / 2;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t bi = 0; bi < b; ++bi) {
    for (int64_t ti = 0; ti < t; ++ti) {
      HWY_DYNAMIC_DISPATCH(RopeHeadsSpan)
      (x + (bi * t + ti) * heads * head_dim, cos + ti * half, sin + ti * half, heads, head_dim,
       direction);
    }
  }
}

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

void VectorSgdUpdate(const SgdConstants& c, float* param, const float* grad, float* buffer,
                     int64_t n) {
  ForEachBlock(n, [&](int64_t begin, int64_t count) {
    HWY_DYNAMIC_DISPATCH(SgdUpdateSpan)
    (c, param + begin, grad + begin, c.has_momentum ? buffer + begin : nullptr, count);
  });
}

void VectorExp(const float* in, float* out, int64_t n) {
  ForEachBlock(n, [&](int64_t begin, int64_t count) {
    HWY_DYNAMIC_DISPATCH(ExpSpan)(in + begin, out + begin, count);
  });
}

void VectorSwiGluForward(float* out, const float* a, const float* b, int64_t n) {
  ForEachBlock(n, [&](int64_t begin, int64_t count) {
    HWY_DYNAMIC_DISPATCH(SwiGluForwardSpan)(out + begin, a + begin, b + begin, count);
  });
}

void VectorSwiGluBackward(float* da, float* db, const float* dout, const float* a, const float* b,
                          int64_t n) {
  ForEachBlock(n, [&](int64_t begin, int64_t count) {
    HWY_DYNAMIC_DISPATCH(SwiGluBackwardSpan)
    (da + begin, db + begin, dout + begin, a + begin, b + begin, count);
  });
}

void VectorRmsNormForward(float* out, float* rstd, const float* inp, const float* weight, int64_t n,
                          int64_t c, double eps) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    rstd[i] = HWY_DYNAMIC_DISPATCH(RmsNormForwardRowSpan)(out + i * c, inp + i * c, weight, c, eps);
  }
}

void VectorRmsNormBackward(float* dinp, float* dweight, const float* dout, const float* inp,
                           const float* weight, const float* rstd, int64_t n, int64_t c) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    HWY_DYNAMIC_DISPATCH(RmsNormBackwardRowSpan)
    (dinp + i * c, dout + i * c, inp + i * c, weight, rstd[i], c);
  }
  internal::ForEachColumnChunk(c, [&](int64_t begin, int64_t end) {
    HWY_DYNAMIC_DISPATCH(RmsNormWeightGradSpan)(dweight, dout, inp, rstd, n, c, begin, end);
  });
}

void VectorCrossEntropyRowMax(float* max, const float* logits, int64_t n, int64_t v) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) max[i] = HWY_DYNAMIC_DISPATCH(RowMaxSpan)(logits + i * v, v);
}

void VectorCrossEntropySumExp(float* sum, const float* logits, const float* max, int64_t n,
                              int64_t v) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    sum[i] = HWY_DYNAMIC_DISPATCH(SumExpRowSpan)(logits + i * v, max[i], v);
}

void VectorCrossEntropyBackward(float* dlogits, const float* logits, const float* lse,
                                const int32_t* targets, int64_t n, int64_t v, float dloss,
                                int64_t first_column) {
  const float scale = CrossEntropyGradScale(targets, n, dloss);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    float* grad = dlogits + i * v;
    const float row_scale = targets[i] == kIgnoreIndex ? 0.0f : scale;
    HWY_DYNAMIC_DISPATCH(SoftmaxRowSpan)(grad, logits + i * v, lse[i], row_scale, v);
    CrossEntropySubtractTarget(grad, targets[i], v, first_column, row_scale);
  }
}

void VectorRopeForward(float* x, const float* cos, const float* sin, int64_t b, int64_t t,
                       int64_t heads, int64_t head_dim) {
  RopeRotate(x, cos, sin, b, t, heads, head_dim, 1.0f);
}

void VectorRopeBackward(float* dx, const float* cos, const float* sin, int64_t b, int64_t t,
                        int64_t heads, int64_t head_dim) {
  RopeRotate(dx, cos, sin, b, t, heads, head_dim, -1.0f);
}

double VectorSumOfSquares(const float* x, int64_t n) {
  constexpr int64_t kBlock = int64_t{1} << 14;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> sums(static_cast<size_t>(blocks));
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (int64_t b = 0; b < blocks; ++b) {
    sums[b] =
        HWY_DYNAMIC_DISPATCH(SumOfSquaresSpan)(x + b * kBlock, std::min(kBlock, n - b * kBlock));
  }
  double total = 0;
  for (double sum : sums) total += sum;
  return total;
}

}  // namespace titan
#endif  // HWY_ONCE
