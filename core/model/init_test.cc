#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/cpu/cpu_compute.h"
#include "core/model/decoder_model.h"
#include "titan/truncated_normal.h"

namespace titan {
namespace {

struct Moments {
  double mean = 0, std = 0, max_abs = 0;
};

Moments Measure(const Tensor& t) {
  Moments m;
  const float* x = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) m.mean += x[i];
  m.mean /= t.numel();
  for (int64_t i = 0; i < t.numel(); ++i) {
    m.std += (x[i] - m.mean) * (x[i] - m.mean);
    m.max_abs = std::max(m.max_abs, std::fabs(static_cast<double>(x[i])));
  }
  m.std = std::sqrt(m.std / t.numel());
  return m;
}

TEST(InitTest, FollowsTorchTitanAndIsDeterministic) {
  LlamaConfig config;  // debugmodel
  auto model = DecoderModel::Create(config);
  ASSERT_TRUE(model.ok());
  EXPECT_TRUE((*model)->Initialize(7).ok());
  const Arena& p = (*model)->params();
  const Moments emb = Measure(*p.Find("tok_embeddings.weight"));
  EXPECT_NEAR(emb.mean, 0, 0.01);
  EXPECT_NEAR(emb.std, 1.0, 0.01);
  EXPECT_NEAR(Measure(*p.Find("layers.2.attention.wq.weight")).std, 0.02, 0.0005);
  EXPECT_NEAR(Measure(*p.Find("layers.2.feed_forward.w1.weight")).std, 0.02, 0.0005);
  EXPECT_NEAR(Measure(*p.Find("layers.2.attention.wo.weight")).std, 0.02 / std::sqrt(6.0), 0.0005);
  EXPECT_NEAR(Measure(*p.Find("layers.0.feed_forward.w3.weight")).std, 0.02 / std::sqrt(2.0),
              0.0005);
  const Moments out = Measure(*p.Find("output.weight"));
  const double out_std = 1 / std::sqrt(256.0);
  EXPECT_LE(out.max_abs, 3 * out_std + 1e-7);
  EXPECT_NEAR(out.std, out_std * 0.9866, 0.002);  // a normal cut at 3 sigma loses 1.3% of its std
  const Moments norm = Measure(*p.Find("layers.5.ffn_norm.weight"));
  EXPECT_EQ(norm.mean, 1.0);
  EXPECT_EQ(norm.std, 0.0);

  auto again = DecoderModel::Create(config);
  EXPECT_TRUE((*again)->Initialize(7).ok());
  const Arena& q = (*again)->params();
  EXPECT_EQ(0, std::memcmp(p.flat_data(), q.flat_data(), p.flat_size() * sizeof(float)));
  EXPECT_TRUE((*again)->Initialize(8).ok());
  EXPECT_NE(0, std::memcmp(p.flat_data(), q.flat_data(), p.flat_size() * sizeof(float)));
}

// The kernel draws the same values whatever the thread count (each a pure function of the key
// and its index), and a piece drawn alone equals that piece of the whole.
TEST(InitTest, TheDrawDependsOnTheKeyAndIndexAlone) {
  const int64_t n = 10000;
  std::vector<float> one(n), many(n);
  Compute& compute = CpuCompute::Get();
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  ASSERT_TRUE(compute.FillTruncatedNormal(FlatF32(one.data(), n), 99, 0.02, -0.04, 0.04).ok());
  omp_set_num_threads(std::max(2, threads));
  ASSERT_TRUE(compute.FillTruncatedNormal(FlatF32(many.data(), n), 99, 0.02, -0.04, 0.04).ok());
  omp_set_num_threads(threads);
  EXPECT_EQ(one, many);
  for (int64_t i : {int64_t{0}, n / 3, n - 1}) {
    EXPECT_EQ(one[i], truncated_normal::At(99, i, 0.02, -0.04, 0.04)) << i;
    EXPECT_LE(std::fabs(one[i]), 0.04f);
  }
}

}  // namespace
}  // namespace titan
