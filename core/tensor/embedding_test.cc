#include "core/tensor/embedding.h"

#include <gtest/gtest.h>

#include <vector>

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

// A vocabulary-parallel slice: rows 2 and 3 of the vocabulary. Tokens outside it look up zeros
// and leave the gradient alone; the others use their row of the slice.
TEST(EmbeddingTest, ASliceOfTheVocabularyServesOnlyItsTokens) {
  const int64_t c = 2;
  const std::vector<float> slice = {20, 21, 30, 31};
  const std::vector<int32_t> tokens = {3, 0, 2, 5};
  std::vector<float> out(tokens.size() * c, -1.0f);
  EmbeddingForward(out.data(), tokens.data(), slice.data(), 4, c, /*first_row=*/2, /*rows=*/2);
  EXPECT_EQ(out, (std::vector<float>{30, 31, 0, 0, 20, 21, 0, 0}));
  std::vector<float> dslice(4, 0.0f);
  const std::vector<float> dout = {1, 2, 3, 4, 5, 6, 7, 8};
  EmbeddingBackward(dslice.data(), dout.data(), tokens.data(), 4, c, 2, 2);
  EXPECT_EQ(dslice, (std::vector<float>{5, 6, 1, 2}));
}

}  // namespace
}  // namespace titan
