#include <gtest/gtest.h>

#include <cmath>

#include "core/model/decoder_model.h"

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
  (*model)->Initialize(7);
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
  (*again)->Initialize(7);
  const Arena& q = (*again)->params();
  EXPECT_EQ(0, std::memcmp(p.flat_data(), q.flat_data(), p.flat_size() * sizeof(float)));
  (*again)->Initialize(8);
  EXPECT_NE(0, std::memcmp(p.flat_data(), q.flat_data(), p.flat_size() * sizeof(float)));
}

}  // namespace
}  // namespace titan
