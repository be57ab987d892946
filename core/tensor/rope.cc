#include "core/tensor/rope.h"

#include <cmath>

#include "titan/compute.h"

namespace titan {
namespace {

template <typename T>
void Rotate(T* x, const T* cos, const T* sin, int64_t b, int64_t t, int64_t heads, int64_t head_dim,
            T direction) {
  const int64_t half = head_dim / 2;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t bi = 0; bi < b; ++bi) {
    for (int64_t ti = 0; ti < t; ++ti) {
      RopeRotateHeads(x + (bi * t + ti) * heads * head_dim, cos + ti * half, sin + ti * half, heads,
                      head_dim, direction);
    }
  }
}

}  // namespace

template <typename T>
void RopeTable(T* cos, T* sin, int64_t seq_len, int64_t head_dim, const RopeConfig& config,
               int64_t position_offset) {
  const int64_t half = head_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    float freq = 1.0f / static_cast<float>(std::pow(static_cast<float>(config.theta), exponent));
    if (config.scaled) freq = ScaledRopeFrequency(freq, config);
    for (int64_t p = 0; p < seq_len; ++p) {
      const float angle = static_cast<float>(p + position_offset) * freq;
      cos[p * half + i] = static_cast<T>(std::cos(static_cast<double>(angle)));
      sin[p * half + i] = static_cast<T>(std::sin(static_cast<double>(angle)));
    }
  }
}

template <typename T>
void RopeForward(T* x, const T* cos, const T* sin, int64_t b, int64_t t, int64_t heads,
                 int64_t head_dim) {
  Rotate(x, cos, sin, b, t, heads, head_dim, T{1});
}

template <typename T>
void RopeBackward(T* dx, const T* cos, const T* sin, int64_t b, int64_t t, int64_t heads,
                  int64_t head_dim) {
  Rotate(dx, cos, sin, b, t, heads, head_dim, T{-1});
}

template void RopeTable(float*, float*, int64_t, int64_t, const RopeConfig&, int64_t);
template void RopeTable(double*, double*, int64_t, int64_t, const RopeConfig&, int64_t);
template void RopeForward(float*, const float*, const float*, int64_t, int64_t, int64_t, int64_t);
template void RopeForward(double*, const double*, const double*, int64_t, int64_t, int64_t,
                          int64_t);
template void RopeBackward(float*, const float*, const float*, int64_t, int64_t, int64_t, int64_t);
template void RopeBackward(double*, const double*, const double*, int64_t, int64_t, int64_t,
                           int64_t);

}  // namespace titan
