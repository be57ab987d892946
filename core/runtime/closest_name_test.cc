#include "core/runtime/closest_name.h"

#include <gtest/gtest.h>

namespace titan {
namespace {

TEST(ClosestName, FindsTyposCaseInsensitively) {
  std::vector<std::string> keys = {"steps", "seq_len", "local_batch_size"};
  EXPECT_EQ(ClosestName("stepz", keys), "steps");
  EXPECT_EQ(ClosestName("SEQ_LEN", keys), "seq_len");
  EXPECT_EQ(ClosestName("local_batchsize", keys), "local_batch_size");
}

TEST(ClosestName, PrefersCandidatesOfTheSameLength) {
  EXPECT_EQ(ClosestName("AdamX", {"adam", "adamw", "sgd"}), "adamw");
}

TEST(ClosestName, RejectsUnrelatedWords) {
  EXPECT_EQ(ClosestName("tokenizer", {"steps", "seq_len"}), "");
  EXPECT_EQ(ClosestName("x", {}), "");
  EXPECT_EQ(DidYouMean("tokenizer", {"steps"}), "");
  EXPECT_EQ(DidYouMean("step", {"steps"}), "; did you mean 'steps'?");
}

}  // namespace
}  // namespace titan
