#include "core/tensor/embedding.h"

#include <gtest/gtest.h>

#include "core/tensor/internal/grad_check.h"

namespace titan {
namespace {

TEST(EmbeddingTest, ForwardGathersRowsAndBackwardAddsRepeats) {
  const int64_t vocab = 4, c = 70;  // more than one column chunk
  const std::vector<int32_t> tokens = {2, 0, 2, 3, 2};
  const int64_t n = tokens.size();
  auto table = internal::RandomVector(vocab * c, 1), dout = internal::RandomVector(n * c, 2);
  std::vector<double> out(n * c);
  EmbeddingForward(out.data(), tokens.data(), table.data(), n, c);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < c; ++j) EXPECT_EQ(out[i * c + j], table[tokens[i] * c + j]);
  }
  auto loss = [&] {
    EmbeddingForward(out.data(), tokens.data(), table.data(), n, c);
    return internal::Dot(out, dout);
  };
  std::vector<double> dtable(vocab * c);
  EmbeddingBackward(dtable.data(), dout.data(), tokens.data(), n, c);
  EXPECT_LT(internal::MaxGradientError(loss, table, dtable), 1e-8);
  for (int64_t j = 0; j < c; ++j) EXPECT_EQ(dtable[1 * c + j], 0.0);  // token 1 never appears
}

}  // namespace
}  // namespace titan
