// Test support: random inputs and a central-difference gradient check in f64.
#ifndef TITAN_CORE_TENSOR_INTERNAL_GRAD_CHECK_H_
#define TITAN_CORE_TENSOR_INTERNAL_GRAD_CHECK_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

namespace titan::internal {

inline std::vector<double> RandomVector(int64_t n, uint32_t seed, double scale = 1.0) {
  std::mt19937 engine(seed);
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<double> values(n);
  for (double& v : values) v = normal(engine);
  return values;
}

inline double Dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

// The largest |analytic - numeric| / max(1, |numeric|) over all elements of x, where numeric is
// the central difference of loss() around x (x is restored afterwards).
inline double MaxGradientError(const std::function<double()>& loss, std::vector<double>& x,
                               const std::vector<double>& analytic, double step = 1e-6) {
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + step;
    const double up = loss();
    x[i] = saved - step;
    const double down = loss();
    x[i] = saved;
    const double numeric = (up - down) / (2 * step);
    worst = std::max(worst, std::fabs(analytic[i] - numeric) / std::max(1.0, std::fabs(numeric)));
  }
  return worst;
}

}  // namespace titan::internal

#endif  // TITAN_CORE_TENSOR_INTERNAL_GRAD_CHECK_H_
