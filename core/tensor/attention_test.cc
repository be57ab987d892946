#include "core/tensor/attention.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>

#include "core/tensor/internal/grad_check.h"

namespace titan {
namespace {

// Softmax(q k^T / sqrt(hd)) v with a full [t, t] score matrix: the textbook definition.
std::vector<double> NaiveAttention(const std::vector<double>& q, const std::vector<double>& k,
                                   const std::vector<double>& v, const AttentionShape& s) {
  std::vector<double> out(q.size());
  const int64_t group = s.heads / s.kv_heads;
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      for (int64_t i = 0; i < s.seq_len; ++i) {
        std::vector<double> p(i + 1);
        double max = -INFINITY, sum = 0;
        const double* qi = &q[((b * s.seq_len + i) * s.heads + h) * s.head_dim];
        for (int64_t j = 0; j <= i; ++j) {
          const double* kj = &k[((b * s.seq_len + j) * s.kv_heads + h / group) * s.head_dim];
          for (int64_t d = 0; d < s.head_dim; ++d) p[j] += qi[d] * kj[d] / std::sqrt(s.head_dim);
          max = std::max(max, p[j]);
        }
        for (double& x : p) sum += (x = std::exp(x - max));
        double* o = &out[((b * s.seq_len + i) * s.heads + h) * s.head_dim];
        for (int64_t j = 0; j <= i; ++j) {
          const double* vj = &v[((b * s.seq_len + j) * s.kv_heads + h / group) * s.head_dim];
          for (int64_t d = 0; d < s.head_dim; ++d) o[d] += p[j] / sum * vj[d];
        }
      }
    }
  }
  return out;
}

class AttentionTest : public testing::TestWithParam<AttentionShape> {};

TEST_P(AttentionTest, ForwardMatchesNaiveAndBackwardMatchesFiniteDifferences) {
  const AttentionShape s = GetParam();
  const int64_t q_size = s.batch * s.seq_len * s.heads * s.head_dim;
  const int64_t kv_size = s.batch * s.seq_len * s.kv_heads * s.head_dim;
  auto q = internal::RandomVector(q_size, 1), k = internal::RandomVector(kv_size, 2);
  auto v = internal::RandomVector(kv_size, 3), dout = internal::RandomVector(q_size, 4);
  std::vector<double> out(q_size), lse(s.batch * s.heads * s.seq_len);
  auto loss = [&] {
    AttentionForward(out.data(), lse.data(), q.data(), k.data(), v.data(), s);
    return internal::Dot(out, dout);
  };
  loss();
  const std::vector<double> expected = NaiveAttention(q, k, v, s);
  for (int64_t i = 0; i < q_size; ++i) ASSERT_NEAR(out[i], expected[i], 1e-12) << i;
  std::vector<double> dq(q_size), dk(kv_size), dv(kv_size);
  AttentionBackward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(),
                    out.data(), lse.data(), s);
  EXPECT_LT(internal::MaxGradientError(loss, q, dq), 1e-7);
  EXPECT_LT(internal::MaxGradientError(loss, k, dk), 1e-7);
  EXPECT_LT(internal::MaxGradientError(loss, v, dv), 1e-7);
}

// Lengths that cross the 32-row query tiles without filling them; {1, 67, 2, 1, 2} gives the
// backward a single task (one batch row, one kv head), which runs with BLAS taking the threads.
INSTANTIATE_TEST_SUITE_P(Shapes, AttentionTest,
                         testing::Values(AttentionShape{2, 5, 2, 2, 4},
                                         AttentionShape{1, 67, 2, 1, 2},
                                         AttentionShape{2, 37, 4, 1, 6}));

TEST(AttentionFloatTest, F32AgreesWithF64) {
  const AttentionShape s{1, 45, 4, 2, 16};
  const int64_t q_size = 45 * 4 * 16, kv_size = 45 * 2 * 16;
  auto q = internal::RandomVector(q_size, 5), k = internal::RandomVector(kv_size, 6);
  auto v = internal::RandomVector(kv_size, 7);
  std::vector<float> q32(q.begin(), q.end()), k32(k.begin(), k.end()), v32(v.begin(), v.end());
  std::vector<float> out32(q_size), lse32(4 * 45);
  AttentionForward(out32.data(), lse32.data(), q32.data(), k32.data(), v32.data(), s);
  const std::vector<double> expected = NaiveAttention(q, k, v, s);
  for (int64_t i = 0; i < q_size; ++i) ASSERT_NEAR(out32[i], expected[i], 1e-5) << i;
}

TEST(AttentionFloatTest, BackwardIsBitIdenticalForAnyThreadCount) {
  const AttentionShape s{2, 70, 4, 2, 8};
  const int64_t q_size = 2 * 70 * 4 * 8, kv_size = 2 * 70 * 2 * 8;
  auto to_float = [](const std::vector<double>& x) {
    return std::vector<float>(x.begin(), x.end());
  };
  const auto q = to_float(internal::RandomVector(q_size, 8));
  const auto k = to_float(internal::RandomVector(kv_size, 9));
  const auto v = to_float(internal::RandomVector(kv_size, 10));
  const auto dout = to_float(internal::RandomVector(q_size, 11));
  std::vector<float> out(q_size), lse(2 * 4 * 70);
  AttentionForward(out.data(), lse.data(), q.data(), k.data(), v.data(), s);
  auto gradients = [&](int threads) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    std::vector<float> grads(q_size + 2 * kv_size);
    AttentionBackward(grads.data(), grads.data() + q_size, grads.data() + q_size + kv_size,
                      dout.data(), q.data(), k.data(), v.data(), out.data(), lse.data(), s);
    omp_set_num_threads(saved);
    return grads;
  };
  EXPECT_EQ(gradients(1), gradients(2));
  EXPECT_EQ(gradients(1), gradients(3));
}

}  // namespace
}  // namespace titan
