#include "core/tensor/bf16_gemm.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

namespace titan {
namespace {

TEST(Bf16GemmSetting, OnlyEmulateOrNothingIsAccepted) {
  unsetenv("TITAN_BF16_GEMM");
  EXPECT_TRUE(CheckBf16GemmSetting().ok());
  setenv("TITAN_BF16_GEMM", "emulate", 1);
  EXPECT_TRUE(CheckBf16GemmSetting().ok());
  setenv("TITAN_BF16_GEMM", "", 1);
  EXPECT_TRUE(CheckBf16GemmSetting().ok());
  setenv("TITAN_BF16_GEMM", "bogus", 1);
  const absl::Status bogus = CheckBf16GemmSetting();
  EXPECT_EQ(bogus.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bogus.message(), ::testing::HasSubstr("TITAN_BF16_GEMM=bogus: expected \"emulate\""));
  unsetenv("TITAN_BF16_GEMM");
}

}  // namespace
}  // namespace titan
