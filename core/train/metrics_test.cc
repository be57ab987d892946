#include "core/train/metrics.h"

#include <gtest/gtest.h>

namespace titan {
namespace {

TEST(FlopPerToken, CountsNonEmbeddingParametersAndCausalAttention) {
  const LlamaConfig debug;  // dim 256, 6 layers, 16 heads, vocab 2048, hidden 768
  // Per layer: wq, wk, wv, wo 4 x 256 x 256, w1, w2, w3 3 x 256 x 768, two norms of 256.
  const double per_layer = 4.0 * 256 * 256 + 3.0 * 256 * 768 + 2 * 256;
  const double non_embedding = 6 * per_layer + 2048.0 * 256 + 256;  // + output and final norm
  EXPECT_DOUBLE_EQ(FlopPerToken(debug, 256), 6 * non_embedding + 6.0 * 6 * 256 * 256);
  // Attention's share grows with the sequence; the parameters' does not.
  EXPECT_DOUBLE_EQ(FlopPerToken(debug, 512) - FlopPerToken(debug, 256), 6.0 * 6 * 256 * 256);
  // Tied, the one table is both the lookup and the output matmul: the count stays the same.
  LlamaConfig tied = debug;
  tied.tie_embeddings = true;
  EXPECT_DOUBLE_EQ(FlopPerToken(tied, 256), FlopPerToken(debug, 256));
}

}  // namespace
}  // namespace titan
