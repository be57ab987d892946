#include "core/model/model_family.h"

#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace titan {
namespace {

using ::testing::HasSubstr;

TEST(ModelFamily, ARecipeNamesItsFamilyAndAnUnknownOneListsTheKnown) {
  absl::StatusOr<const ModelFamily*> llama = ModelFamilyNamed("llama3");
  ASSERT_TRUE(llama.ok()) << llama.status();
  EXPECT_EQ(*llama, &LlamaFamily());
  const absl::Status unknown = ModelFamilyNamed("qwen3").status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.message(), HasSubstr("\"qwen3\""));
  EXPECT_THAT(unknown.message(), HasSubstr("llama3"));
}

// Every parameter is declared once, with a tensor-parallel style, and its shape divides as the
// style says: on 2 tp ranks the split dimension halves, the others stay.
TEST(ModelFamily, LlamaDeclaresEveryParameterWithItsSplitAndItsInit) {
  LlamaConfig config;
  config.n_layers = 2;
  const std::vector<ParameterDecl> whole = InArenaOrder(LlamaFamily().Declare(config, 1));
  const std::vector<ParameterDecl> half = InArenaOrder(LlamaFamily().Declare(config, 2));
  ASSERT_EQ(whole.size(), 1u + 2 * 9 + 2);
  ASSERT_EQ(half.size(), whole.size());
  std::set<std::string> names;
  for (size_t i = 0; i < whole.size(); ++i) {
    const ParameterDecl& w = whole[i];
    EXPECT_TRUE(names.insert(w.name).second) << w.name;
    EXPECT_EQ(half[i].name, w.name);
    ASSERT_NE(w.tp_style, TensorParallelStyle::kUndeclared) << w.name;
    std::vector<int64_t> expected = w.shape;
    if (w.tp_style == TensorParallelStyle::kRowwise) expected[1] /= 2;
    if (w.tp_style == TensorParallelStyle::kColumnwise ||
        w.tp_style == TensorParallelStyle::kVocabParallelEmbedding) {
      expected[0] /= 2;
    }
    EXPECT_EQ(half[i].shape, expected) << w.name;
    // Norms start at one and are never a matmul operand; every matrix is drawn.
    const bool norm = w.shape.size() == 1;
    EXPECT_EQ(w.init.kind == ParameterInit::Kind::kOnes, norm) << w.name;
    EXPECT_EQ(w.matmul_weight, !norm && w.name != "tok_embeddings.weight") << w.name;
  }
  EXPECT_EQ(whole.front().name, "tok_embeddings.weight");
  EXPECT_EQ(whole.back().name, "output.weight");
  config.tie_embeddings = true;
  EXPECT_EQ(InArenaOrder(LlamaFamily().Declare(config, 1)).back().name, "norm.weight");
}

}  // namespace
}  // namespace titan
