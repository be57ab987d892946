// The mixture of experts inside the model: the loads it counts and the bias that balances them.
// Its numbers against PyTorch are tests/reference/qwen3_reference_test.cc's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "core/model/decoder_model.h"

namespace titan {
namespace {

LlamaConfig TinyMoe() {
  LlamaConfig config = *Qwen3Family().Flavor("debugmodel_moe");
  config.dim = 32, config.n_layers = 3, config.n_heads = 4, config.n_kv_heads = 2;
  config.explicit_head_dim = 8, config.explicit_hidden_dim = 48, config.vocab_size = 64;
  config.moe.experts = 4, config.moe.top_k = 2, config.moe.hidden_dim = 16;
  config.moe.dense_layers = 1, config.moe.load_balance_coeff = 0.1;
  return config;
}

std::unique_ptr<DecoderModel> Make(const LlamaConfig& config, const char* ac_mode = "none") {
  auto ac = ParseActivationCheckpoint(ac_mode, "");
  auto model = DecoderModel::Create(config, *ac, ModelCompute{}, PipelinePlan{}, Qwen3Family());
  EXPECT_TRUE(model.ok()) << model.status();
  EXPECT_TRUE((*model)->Initialize(7).ok());
  return std::move(*model);
}

std::vector<float> Bias(const DecoderModel& model, int64_t layer) {
  const Arena& params = model.params();
  for (int i = 0; i < params.size(); ++i) {
    if (params.name(i) != absl::StrCat("layers.", layer, ".moe.expert_bias")) continue;
    const float* bias = params.at(i).data<float>();
    return std::vector<float>(bias, bias + params.at(i).numel());
  }
  return {};
}

// Every trained microbatch counts each token's k choices once, in each layer with experts;
// recomputing the forward for the backward (full activation checkpointing) does not count again,
// nor does a forward alone (validation): a run resumed from a checkpoint moves the bias as the
// uninterrupted run did.
TEST(Moe, CountsEachTokensChoicesOncePerForward) {
  for (const char* mode : {"none", "full"}) {
    SCOPED_TRACE(mode);
    std::unique_ptr<DecoderModel> model = Make(TinyMoe(), mode);
    std::vector<int32_t> tokens(2 * 9), targets(2 * 9);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = (i * 11) % 64, targets[i] = i % 64;
    for (int pass = 0; pass < 2; ++pass) {
      ASSERT_TRUE(model->Forward(tokens.data(), targets.data(), 2, 9).ok());
      ASSERT_TRUE(model->Backward().ok());
    }
    ASSERT_TRUE(model->Forward(tokens.data(), targets.data(), 2, 9).ok());  // validation's
    const std::vector<DecoderModel::ExpertLoad> loads = model->TakeExpertLoads();
    ASSERT_EQ(loads.size(), 2u);  // layers 1 and 2; layer 0 is dense
    for (const DecoderModel::ExpertLoad& load : loads) {
      int64_t total = 0;
      for (int64_t tokens_of_expert : load.tokens) total += tokens_of_expert;
      EXPECT_EQ(total, 2 * 2 * 9 * 2) << "layer " << load.layer;  // 2 passes x 18 tokens x k 2
    }
    EXPECT_EQ(loads[0].layer, 1);
    for (const DecoderModel::ExpertLoad& load : model->TakeExpertLoads()) {
      EXPECT_THAT(load.tokens, testing::Each(0));
    }
  }
}

// TorchTitan's rule, worked by hand: coefficient 0.1, loads {5, 1, 3, 3} (mean 3): signs of mean
// - load {-1, +1, 0, 0}, moves {-0.1, 0.1, 0, 0}, their mean 0. Loads {8, 0, 0, 0} (mean 2):
// moves {-0.1, 0.1, 0.1, 0.1} less their mean 0.05.
TEST(Moe, MovesTheBiasAsTorchTitanDoes) {
  std::unique_ptr<DecoderModel> model = Make(TinyMoe());
  ASSERT_TRUE(model->BalanceExperts({{1, {5, 1, 3, 3}}, {2, {8, 0, 0, 0}}}).ok());
  EXPECT_THAT(Bias(*model, 1), testing::Pointwise(testing::FloatEq(), {-0.1f, 0.1f, 0.0f, 0.0f}));
  EXPECT_THAT(Bias(*model, 2),
              testing::Pointwise(testing::FloatEq(), {-0.15f, 0.05f, 0.05f, 0.05f}));
  // Applied again, the moves add up.
  ASSERT_TRUE(model->BalanceExperts({{1, {5, 1, 3, 3}}}).ok());
  EXPECT_THAT(Bias(*model, 1), testing::Pointwise(testing::FloatEq(), {-0.2f, 0.2f, 0.0f, 0.0f}));
}

// The bias steers the choice: a large bias on one expert sends every token there, while the
// weights (the unbiased scores) keep the loss finite and the gradients flowing.
TEST(Moe, ABiasSteersTheChoice) {
  std::unique_ptr<DecoderModel> model = Make(TinyMoe());
  ASSERT_TRUE(model->BalanceExperts({{1, {1, 1, 1, 0}}}).ok());  // only expert 3 gains
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(model->BalanceExperts({{1, {1, 0, 1, 0}}}).ok());
  std::vector<int32_t> tokens(16), targets(16);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = (i * 5) % 64, targets[i] = i % 64;
  ASSERT_TRUE(model->Forward(tokens.data(), targets.data(), 1, 16).ok());
  ASSERT_TRUE(model->Backward().ok());
  const std::vector<DecoderModel::ExpertLoad> loads = model->TakeExpertLoads();
  // Experts 1 and 3 (raised by 200 x 0.1) take every token's two choices in layer 1.
  EXPECT_THAT(loads[0].tokens, testing::ElementsAre(0, 16, 0, 16));
}

// Without a coefficient the model has no bias, and balancing leaves it as it is.
TEST(Moe, NoCoefficientMeansNoBias) {
  LlamaConfig config = TinyMoe();
  config.moe.load_balance_coeff = 0;
  std::unique_ptr<DecoderModel> model = Make(config);
  EXPECT_TRUE(Bias(*model, 1).empty());
  EXPECT_TRUE(model->BalanceExperts({{1, {5, 1, 3, 3}}}).ok());
}

// Tensor parallelism splits each expert's hidden features: a degree that does not divide them is
// refused, naming them.
TEST(Moe, TensorParallelismSplitsTheExpertsHiddenFeatures) {
  EXPECT_TRUE(CheckTensorParallelDegree(TinyMoe(), 2).ok());
  LlamaConfig odd = TinyMoe();
  odd.moe.hidden_dim = 15;
  const absl::Status status = CheckTensorParallelDegree(odd, 2);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), testing::HasSubstr("the experts' hidden dim (moe_inter_dim)"));
}

// TorchTitan's forced balanced routing: token t's j-th choice is expert (t k + j) mod experts,
// so each of the 4 experts gets exactly a quarter of the 2 x 9 tokens' 2 choices, whatever the
// scores and the bias say.
TEST(Moe, ForcedBalanceChoosesRoundRobin) {
  LlamaConfig config = TinyMoe();
  config.moe.force_balance = true;
  std::unique_ptr<DecoderModel> model = Make(config);
  std::vector<int32_t> tokens(2 * 9, 5), targets(2 * 9, 1);  // one token, one score row
  ASSERT_TRUE(model->Forward(tokens.data(), targets.data(), 2, 9).ok());
  ASSERT_TRUE(model->Backward().ok());
  for (const DecoderModel::ExpertLoad& load : model->TakeExpertLoads()) {
    EXPECT_THAT(load.tokens, testing::Each(9)) << "layer " << load.layer;
  }
}

}  // namespace
}  // namespace titan
