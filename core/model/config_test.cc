#include "core/model/config.h"

#include <gtest/gtest.h>

namespace titan {
namespace {

struct FlavorCase {
  const char* flavor;
  int64_t hidden_dim;
  int64_t parameters;  // the published counts
};

// Names each case by its flavor (test names stay the same from one build to the next).
void PrintTo(const FlavorCase& c, std::ostream* out) { *out << c.flavor; }

class FlavorTest : public testing::TestWithParam<FlavorCase> {};

TEST_P(FlavorTest, HiddenDimAndParameterCount) {
  auto config = LlamaFlavor(GetParam().flavor);
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_TRUE(config->Validate().ok());
  EXPECT_EQ(config->hidden_dim(), GetParam().hidden_dim);
  EXPECT_EQ(config->ParameterCount(), GetParam().parameters);
}

INSTANTIATE_TEST_SUITE_P(Llama3, FlavorTest,
                         testing::Values(FlavorCase{"debugmodel", 768, 6163712},
                                         FlavorCase{"1B", 8192, 1235814400},
                                         FlavorCase{"3B", 8192, 3212749824},
                                         FlavorCase{"8B", 14336, 8030261248},
                                         FlavorCase{"70B", 28672, 70553706496},
                                         FlavorCase{"405B", 53248, 405853388800}));

TEST(ConfigTest, RejectsUnknownFlavorAndBadShapes) {
  auto unknown = LlamaFlavor("7B");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("found '7B'"), std::string::npos);
  LlamaConfig config;
  config.n_kv_heads = 3;
  EXPECT_FALSE(config.Validate().ok());
  config.n_kv_heads = 4;
  config.n_heads = 12;  // 256 / 12 is not whole
  EXPECT_FALSE(config.Validate().ok());
}

}  // namespace
}  // namespace titan
