#include "core/model/decoder_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>

namespace titan {
namespace {

LlamaConfig TinyConfig() {
  LlamaConfig config;
  config.dim = 32, config.n_layers = 4, config.n_heads = 4, config.n_kv_heads = 2;
  config.vocab_size = 50, config.multiple_of = 16;
  return config;
}

struct Batch {
  std::vector<int32_t> tokens, targets;
};

Batch MakeBatch(int64_t n, int64_t vocab) {
  Batch batch;
  for (int64_t i = 0; i < n; ++i) {
    batch.tokens.push_back(static_cast<int32_t>((i * 7 + 3) % vocab));
    batch.targets.push_back(static_cast<int32_t>((i * 11 + 5) % vocab));
  }
  return batch;
}

TEST(LlamaTest, ParametersAreTheSdkViewOfTheArenas) {
  LlamaConfig config = TinyConfig();
  config.tie_embeddings = true;
  auto model = DecoderModel::Create(config);
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<Parameter> parameters = (*model)->Parameters();
  int64_t total = 0;
  for (const Parameter& p : parameters) {
    total += p.value.numel();
    EXPECT_EQ(p.value.shape, p.grad.shape);
    EXPECT_NE(p.name, "output.weight");  // tied: the embedding serves as the output projection
  }
  EXPECT_EQ(total, config.ParameterCount());
  EXPECT_EQ(parameters[1].name, "layers.0.attention_norm.weight");
  EXPECT_EQ(parameters[2].value.shape, (std::vector<int64_t>{32, 32}));
}

// A group of `size` ranks that only answers size() and rank(): enough for the layout checks,
// which run before any communication.
class LayoutOnlyGroup : public Communicator {
 public:
  explicit LayoutOnlyGroup(int size) : size_(size) {}
  int rank() const override { return 0; }
  int size() const override { return size_; }
  absl::Status AllReduce(TensorView, ReduceOp) override { return Unexpected(); }
  absl::Status ReduceScatter(const TensorView&, TensorView, ReduceOp) override {
    return Unexpected();
  }
  absl::Status AllGather(const TensorView&, TensorView) override { return Unexpected(); }
  absl::Status Broadcast(TensorView, int) override { return Unexpected(); }
  absl::Status Send(const TensorView&, int, int) override { return Unexpected(); }
  absl::Status Recv(TensorView, int, int) override { return Unexpected(); }
  absl::Status Barrier() override { return Unexpected(); }
  absl::StatusOr<std::unique_ptr<Communicator>> Split(int, int) override { return Unexpected(); }

 private:
  static absl::Status Unexpected() { return absl::InternalError("no communication expected"); }
  int size_;
};

TEST(LlamaTest, TensorParallelLayoutsThatCannotSplitAreErrorsNamingTheNumbers) {
  auto model = DecoderModel::Create(TinyConfig());  // 4 heads, 2 kv heads, vocabulary 50
  ASSERT_TRUE(model.ok());
  LayoutOnlyGroup three(3), two(2), four(4);
  absl::Status status = (*model)->SetTensorParallel({&three});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("n_heads = 4"), std::string::npos) << status;
  status = (*model)->SetTensorParallel({&four});
  EXPECT_NE(status.message().find("n_kv_heads = 2"), std::string::npos) << status;
  LlamaConfig config = TinyConfig();
  config.vocab_size = 51;
  model = DecoderModel::Create(config);
  ASSERT_TRUE(model.ok());
  status = (*model)->SetTensorParallel({&two});
  EXPECT_NE(status.message().find("vocab_size = 51"), std::string::npos) << status;
  // Divisible, but the parameters are whole: the model will not compute with the wrong boxes.
  model = DecoderModel::Create(TinyConfig());
  ASSERT_TRUE(model.ok());
  status = (*model)->SetTensorParallel({&two});
  EXPECT_NE(status.message().find("tok_embeddings.weight to hold [25, 32], found [50, 32]"),
            std::string::npos)
      << status;
  EXPECT_EQ((*model)->tensor_parallel_degree(), 1);
  EXPECT_EQ((*model)->root().tensor_parallel_target(), model->get());
}

TEST(LlamaTest, RejectsBadInput) {
  auto model = DecoderModel::Create(TinyConfig());
  ASSERT_TRUE(model.ok());
  EXPECT_EQ((*model)->Backward().code(), absl::StatusCode::kFailedPrecondition);
  Batch batch = MakeBatch(6, 50);
  batch.tokens[4] = 50;
  auto loss = (*model)->Forward(batch.tokens.data(), batch.targets.data(), 2, 3);
  ASSERT_FALSE(loss.ok());
  EXPECT_NE(loss.status().message().find("found 50 at position 4"), std::string::npos);
}

// Recomputation reruns the same kernels on the same inputs, so every mode must give the same
// bits as keeping everything, while planning less activation memory; in bf16 too, where the
// recomputed matmul inputs are rounded into shared bf16 slots.
class LlamaActivationCheckpointTest : public ::testing::TestWithParam<DType> {};

TEST_P(LlamaActivationCheckpointTest, GivesIdenticalGradients) {
  const int64_t batch = 2, seq_len = 13;
  const Batch data = MakeBatch(batch * seq_len, 50);
  std::vector<float> reference_grads;
  float reference_loss = 0;
  size_t keep_all_bytes = 0;
  for (auto [mode, option] :
       {std::pair{"none", ""}, {"full", ""}, {"selective", "2"}, {"selective", "op"}}) {
    SCOPED_TRACE(std::string(mode) + " " + option);
    auto ac = ParseActivationCheckpoint(mode, option);
    ASSERT_TRUE(ac.ok());
    auto model = DecoderModel::Create(TinyConfig(), *ac, ModelCompute{nullptr, GetParam()});
    ASSERT_TRUE(model.ok());
    EXPECT_TRUE((*model)->Initialize(3).ok());
    for (int step = 0; step < 2; ++step) {  // the second step reuses the planned memory
      (*model)->ZeroGrad();
      auto loss = (*model)->Forward(data.tokens.data(), data.targets.data(), batch, seq_len);
      ASSERT_TRUE(loss.ok());
      ASSERT_TRUE((*model)->Backward().ok());
      if (std::string(mode) == "none") reference_loss = *loss;
      EXPECT_EQ(*loss, reference_loss);
    }
    const Arena& grads = (*model)->grads();
    std::vector<float> flat(grads.flat_data(), grads.flat_data() + grads.flat_size());
    if (std::string(mode) == "none") {
      reference_grads = flat;
      keep_all_bytes = (*model)->activation_bytes();
      EXPECT_GT(std::inner_product(flat.begin(), flat.end(), flat.begin(), 0.0), 0.0);
    } else {
      EXPECT_EQ(flat, reference_grads);
      EXPECT_LT((*model)->activation_bytes(), keep_all_bytes);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(F32AndBf16, LlamaActivationCheckpointTest,
                         ::testing::Values(DType::kF32, DType::kBF16),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

// Under mixed precision the activations only matmuls read (each block's ln1, ln2 and SwiGLU
// output, and the final norm's output) are planned in bf16, the rest in f32 as before; the bf16
// plan also holds the bf16 scratch the other matmul operands are rounded into.
TEST(LlamaTest, Bf16StoresTheMatmulInputsInHalfTheBytes) {
  const LlamaConfig config = TinyConfig();
  const int64_t batch = 2, seq_len = 13, n = batch * seq_len, d = config.dim;
  const int64_t f = config.hidden_dim(), qd = config.n_heads * config.head_dim();
  const Batch data = MakeBatch(n, config.vocab_size);
  // Each arena entry starts on an alignment boundary.
  auto planned = [](int64_t bytes) {
    const int64_t a = static_cast<int64_t>(Storage::kAlignment);
    return (bytes + a - 1) / a * a;
  };
  int64_t largest_parameter = 0;
  for (const ParameterDecl& decl : InArenaOrder(LlamaFamily().Declare(config, 1))) {
    largest_parameter = std::max(
        largest_parameter,
        std::accumulate(decl.shape.begin(), decl.shape.end(), int64_t{1}, std::multiplies()));
  }
  const int64_t bf16_scratch = planned(2 * n * qd) +
                               planned(2 * n * std::max({d, qd, f, config.vocab_size})) +
                               planned(2 * largest_parameter);
  for (auto [mode, option] : {std::pair{"none", ""}, {"selective", "2"}, {"selective", "op"}}) {
    SCOPED_TRACE(std::string(mode) + " " + option);
    auto ac = ParseActivationCheckpoint(mode, option);
    ASSERT_TRUE(ac.ok());
    // The final norm's output, and per stage that makes a matmul input, one slot per layer that
    // keeps it and one shared by the layers that recompute it.
    int64_t saved = planned(4 * n * d) - planned(2 * n * d);
    for (auto [stage, elements] : {std::pair{BlockStage::kAttentionNorm, n * d},
                                   {BlockStage::kFfnNorm, n * d},
                                   {BlockStage::kSwiGlu, n * f}}) {
      int64_t slots = 0;
      bool recomputed = false;
      for (int64_t l = 0; l < config.n_layers; ++l) {
        const bool kept = KeepsStage(ac->PolicyFor(l), stage);
        slots += kept ? 1 : 0;
        recomputed = recomputed || !kept;
      }
      slots += recomputed ? 1 : 0;
      saved += slots * (planned(4 * elements) - planned(2 * elements));
    }
    std::array<int64_t, 2> bytes{};
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      auto model = DecoderModel::Create(config, *ac, ModelCompute{nullptr, dtype});
      ASSERT_TRUE(model.ok()) << model.status();
      EXPECT_TRUE((*model)->Initialize(3).ok());
      auto loss = (*model)->Forward(data.tokens.data(), data.targets.data(), batch, seq_len);
      ASSERT_TRUE(loss.ok()) << loss.status();
      ASSERT_TRUE((*model)->Backward().ok());
      bytes[dtype == DType::kBF16] = static_cast<int64_t>((*model)->activation_bytes());
    }
    EXPECT_EQ(bytes[0] - bytes[1], saved - bf16_scratch);
  }
}

// A tied table is the output projection too: it starts small enough that the first logits are of
// order one, so the first loss is near ln(vocab), as for the untied flavor (not 250 as it was with
// the embedding's Normal(0, 1)).
TEST(LlamaTest, ATiedModelStartsNearTheUniformLoss) {
  for (const char* flavor : {"debugmodel", "debugmodel_tied"}) {
    SCOPED_TRACE(flavor);
    const LlamaConfig config = *LlamaFlavor(flavor);
    auto model = DecoderModel::Create(config);
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_TRUE((*model)->Initialize(7).ok());
    const Batch data = MakeBatch(2 * 32, config.vocab_size);
    auto loss = (*model)->Forward(data.tokens.data(), data.targets.data(), 2, 32);
    ASSERT_TRUE(loss.ok()) << loss.status();
    EXPECT_NEAR(*loss, std::log(static_cast<double>(config.vocab_size)), 1.0);
  }
}

}  // namespace
}  // namespace titan
