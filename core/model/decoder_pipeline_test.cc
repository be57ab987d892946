// The stage operations against the whole model: two stages holding half the blocks each, run
// microbatch by microbatch with their boundary tensors copied across, give the whole model's
// losses and gradients, with the backward whole or split into input and weight passes, in f32,
// with bf16 matmul operands (whose inputs the stages keep in bf16) or with the linear layers in
// Float8.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <tuple>

#include "core/model/decoder_model.h"
#include "core/model/float8_test_plugin.h"
#include "core/runtime/memory_snapshot.h"

namespace titan {
namespace {

LlamaConfig TinyConfig() {
  LlamaConfig config;
  config.dim = 32, config.n_layers = 4, config.n_heads = 4, config.n_kv_heads = 2;
  config.vocab_size = 50, config.multiple_of = 16;
  return config;
}

std::vector<int32_t> Ids(int64_t n, int64_t mul, int64_t add, int64_t vocab) {
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>((i * mul + add) % vocab));
  return ids;
}

std::map<std::string, std::vector<float>> Grads(const DecoderModel& model) {
  std::map<std::string, std::vector<float>> grads;
  for (const Parameter& p : model.Parameters()) {
    const float* g = p.grad.data_as<const float>();
    grads[p.name].assign(g, g + p.grad.numel());
  }
  return grads;
}

void CopyView(const TensorView& from, const TensorView& to) {
  ASSERT_EQ(from.numel(), to.numel());
  std::copy_n(from.data_as<const float>(), from.numel(), to.data_as<float>());
}

// (split backward, activation checkpointing of every block, Float8, bf16 matmul operands)
class PipelineStagesTest : public ::testing::TestWithParam<std::tuple<bool, bool, bool, bool>> {};

TEST_P(PipelineStagesTest, TwoStagesReproduceTheWholeModel) {
  const auto [split, checkpointed, float8, bf16] = GetParam();
  const ModelCompute compute{nullptr, bf16 ? DType::kBF16 : DType::kF32};
  const TensorwiseTestPlugin tensorwise;
  absl::StatusOr<ActivationCheckpoint> ac =
      ParseActivationCheckpoint(checkpointed ? "full" : "none", "2");
  ASSERT_TRUE(ac.ok()) << ac.status();
  const LlamaConfig config = TinyConfig();
  const int64_t batch = 2, seq_len = 8, n = batch * seq_len, microbatches = 3;
  // The whole model, one microbatch after another (gradient accumulation).
  auto whole = DecoderModel::Create(config, {}, compute);
  ASSERT_TRUE(whole.ok()) << whole.status();
  if (float8) {
    ASSERT_TRUE((*whole)->ConvertToFloat8(tensorwise).ok());
  }
  EXPECT_TRUE((*whole)->Initialize(7).ok());
  (*whole)->ZeroGrad();
  std::vector<std::vector<int32_t>> tokens, targets;
  std::vector<float> losses;
  for (int64_t m = 0; m < microbatches; ++m) {
    tokens.push_back(Ids(n, 7 + m, 3, config.vocab_size));
    targets.push_back(Ids(n, 11, 5 + m, config.vocab_size));
    auto loss = (*whole)->Forward(tokens[m].data(), targets[m].data(), batch, seq_len);
    ASSERT_TRUE(loss.ok()) << loss.status();
    losses.push_back(*loss);
    ASSERT_TRUE((*whole)->Backward().ok());
  }
  // Stage 0: embedding and blocks 0-1; stage 1: blocks 2-3, norm, output and loss.
  auto first = DecoderModel::Create(config, *ac, compute, PipelinePlan{2, {{0, 0, 2}}});
  auto last = DecoderModel::Create(config, *ac, compute, PipelinePlan{2, {{1, 2, 4}}});
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(last.ok()) << last.status();
  for (auto* stage : {&*first, &*last}) {
    if (float8) {
      ASSERT_TRUE((*stage)->ConvertToFloat8(tensorwise).ok());
    }
    EXPECT_TRUE((*stage)->Initialize(7).ok());
    (*stage)->ZeroGrad();
    ASSERT_TRUE((*stage)->SetMicrobatches(tokens, targets, batch, seq_len).ok());
  }
  EXPECT_TRUE((*first)->holds_first_stage() && !(*first)->holds_last_stage());
  EXPECT_FALSE((*first)->Forward(tokens[0].data(), targets[0].data(), batch, seq_len).ok());
  // GPipe: every forward, then every backward (in reverse), the weight passes last.
  for (int m = 0; m < microbatches; ++m) {
    ASSERT_TRUE((*first)->Forward(0, m).ok());
    CopyView(*(*first)->StageOutput(0, m), *(*last)->StageInput(1, m));
    ASSERT_TRUE((*last)->Forward(1, m).ok());
    EXPECT_NEAR((*last)->microbatch_losses()[m], losses[m], 1e-6 * std::abs(losses[m]));
  }
  for (int m = microbatches - 1; m >= 0; --m) {
    ASSERT_TRUE((split ? (*last)->BackwardInput(1, m) : (*last)->Backward(1, m)).ok());
    CopyView(*(*last)->InputGrad(1, m), *(*first)->OutputGrad(0, m));
    ASSERT_TRUE((split ? (*first)->BackwardInput(0, m) : (*first)->Backward(0, m)).ok());
  }
  if (split) {
    for (int m = 0; m < microbatches; ++m) {
      ASSERT_TRUE((*last)->BackwardWeight(1, m).ok());
      ASSERT_TRUE((*first)->BackwardWeight(0, m).ok());
    }
  }
  std::map<std::string, std::vector<float>> expected = Grads(**whole), found = Grads(**first);
  for (auto& [name, values] : Grads(**last)) found[name] = values;
  ASSERT_EQ(found.size(), expected.size());
  for (const auto& [name, values] : expected) {
    ASSERT_EQ(found[name].size(), values.size()) << name;
    double norm = 0, diff = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      norm += values[i] * values[i];
      diff += (found[name][i] - values[i]) * (found[name][i] - values[i]);
    }
    EXPECT_LE(std::sqrt(diff), 1e-5 * std::sqrt(norm) + 1e-9) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(WholeAndSplitBackward, PipelineStagesTest,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool(), ::testing::Bool(),
                                            ::testing::Bool()));

// The split's weight pass reads memory planned with the activations (counted in
// activation_bytes), allocated at a set's first BackwardInput and reused in every later step.
TEST(PipelineStagesTest, SplitBackwardKeepsItsWeightPassInPlannedMemory) {
  const LlamaConfig config = TinyConfig();
  const int64_t batch = 2, seq_len = 8, n = batch * seq_len, microbatches = 2;
  std::vector<std::vector<int32_t>> tokens, targets;
  for (int64_t m = 0; m < microbatches; ++m) {
    tokens.push_back(Ids(n, 7 + m, 3, config.vocab_size));
    targets.push_back(Ids(n, 11, 5 + m, config.vocab_size));
  }
  for (const char* mode : {"none", "full"}) {
    SCOPED_TRACE(mode);
    absl::StatusOr<ActivationCheckpoint> ac = ParseActivationCheckpoint(mode, "2");
    ASSERT_TRUE(ac.ok()) << ac.status();
    // Both stages on one rank (as a V places them), handing over in memory.
    auto model = DecoderModel::Create(config, *ac, {}, PipelinePlan{2, {{0, 0, 2}, {1, 2, 4}}});
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_TRUE((*model)->Initialize(7).ok());
    (*model)->ZeroGrad();
    auto step = [&] {
      ASSERT_TRUE((*model)->SetMicrobatches(tokens, targets, batch, seq_len).ok());
      for (int m = 0; m < microbatches; ++m) {
        ASSERT_TRUE((*model)->Forward(0, m).ok());
        ASSERT_TRUE((*model)->Forward(1, m).ok());
      }
      for (int m = 0; m < microbatches; ++m) {
        ASSERT_TRUE((*model)->BackwardInput(1, m).ok());
        ASSERT_TRUE((*model)->BackwardInput(0, m).ok());
      }
      for (int m = 0; m < microbatches; ++m) {
        ASSERT_TRUE((*model)->BackwardWeight(1, m).ok());
        ASSERT_TRUE((*model)->BackwardWeight(0, m).ok());
      }
    };
    ASSERT_TRUE((*model)->SetMicrobatches(tokens, targets, batch, seq_len).ok());
    const size_t before = (*model)->activation_bytes();
    step();
    // Per set: every projection's output gradient but the output's (the logits hold it), the
    // norms' sums, the embedding's gradient and, when recomputed, the blocks' matmul inputs.
    const int64_t d = config.dim, qd = config.n_heads * config.head_dim();
    const int64_t kvd = config.n_kv_heads * config.head_dim();
    int64_t f = 0;
    for (const Parameter& p : (*model)->Parameters()) {
      if (p.name == "layers.0.feed_forward.w1.weight") f = p.value.shape[0];
    }
    ASSERT_GT(f, 0);
    int64_t floats = config.n_layers * (n * (qd + 2 * kvd + d + 2 * f + d) + 2 * d) + d + n * d;
    if (std::string(mode) == "full") floats += config.n_layers * n * (d + qd + d + f);
    EXPECT_GE((*model)->activation_bytes() - before,
              static_cast<size_t>(microbatches * floats) * sizeof(float));
    // The second step allocates nothing.
    MemoryTracker::Get().Enable(::testing::TempDir(), 0);
    step();
    EXPECT_EQ(MemoryTracker::Get().peak_bytes(), 0u);
    MemoryTracker::Get().Reset();
  }
}

TEST(PipelineStagesTest, StagesHoldOnlyTheirParametersUnderGlobalNames) {
  auto middle = DecoderModel::Create(TinyConfig(), {}, {}, PipelinePlan{3, {{1, 1, 3}}});
  ASSERT_TRUE(middle.ok()) << middle.status();
  std::vector<std::string> names;
  for (const Parameter& p : (*middle)->Parameters()) names.push_back(p.name);
  EXPECT_EQ(names.size(), 18u);  // blocks 1 and 2, nine weights each
  EXPECT_EQ(names.front(), "layers.1.attention_norm.weight");
  EXPECT_EQ(names.back(), "layers.2.feed_forward.w3.weight");
}

TEST(PipelineStagesTest, TiedEmbeddingsAcrossStagesAreRefused) {
  LlamaConfig config = TinyConfig();
  config.tie_embeddings = true;
  auto first = DecoderModel::Create(config, {}, {}, PipelinePlan{2, {{0, 0, 2}}});
  ASSERT_FALSE(first.ok());
  EXPECT_NE(first.status().message().find("tie_embeddings"), std::string::npos);
}

}  // namespace
}  // namespace titan
