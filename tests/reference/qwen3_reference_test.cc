// titan's qwen3 family against the PyTorch reference (qwen3_reference.py): QK-norm with a head
// size apart from dim / n_heads, and mixtures of experts (softmax and sigmoid scores, a bias that
// changes the choice, shared experts, dense first layers, one expert, every checkpointing mode,
// TorchTitan's forced round-robin choice).
// In f32: logits and loss within 1e-5 relative error, every gradient within 1e-4 (relative norm),
// as the Llama reference test.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "core/model/decoder_model.h"
#include "core/tensor/cross_entropy.h"
#include "tests/reference/reference_files.h"

namespace titan {
namespace {

using reference::ReadFloats;
using reference::RelativeError;
using reference::WriteBinary;
namespace fs = std::filesystem;

struct Case {
  const char* name;
  int64_t experts, top_k, shared_experts, dense_layers;
  bool sigmoid;
  double route_scale, bias;  // bias: the amplitude of the experts' bias (0: none)
  const char* ac_mode;
  const char* ac_option;
  bool force_balance = false;  // TorchTitan's debug.moe_force_load_balance
};

LlamaConfig ConfigOf(const Case& c) {
  LlamaConfig config;
  config.dim = 32, config.n_layers = 3, config.n_heads = 4, config.n_kv_heads = 2;
  config.explicit_head_dim = 12, config.explicit_hidden_dim = 40, config.vocab_size = 53;
  config.qk_norm = true, config.norm_eps = 1e-6;
  config.rope.theta = 1e6, config.rope.scaled = false;
  config.moe.experts = c.experts, config.moe.top_k = c.top_k, config.moe.hidden_dim = 24;
  config.moe.shared_experts = c.shared_experts, config.moe.dense_layers = c.dense_layers;
  config.moe.sigmoid = c.sigmoid, config.moe.route_scale = c.route_scale;
  config.moe.load_balance_coeff = c.bias > 0 ? 1e-3 : 0;
  config.moe.force_balance = c.force_balance;
  return config;
}

const Case kCases[] = {
    {"dense", 0, 0, 0, 0, false, 1.0, 0, "none", ""},
    {"softmax_top2", 4, 2, 0, 0, false, 1.0, 0, "none", ""},
    {"softmax_top2_full_ac", 4, 2, 0, 0, false, 1.0, 0, "full", ""},
    {"sigmoid_shared_dense_first_bias", 6, 3, 1, 1, true, 2.5, 0.3, "selective", "op"},
    {"one_expert", 1, 1, 0, 0, false, 1.0, 0, "selective", "2"},
    {"every_expert", 3, 3, 1, 0, false, 1.0, 0.2, "none", ""},
    {"round_robin_sigmoid_bias", 6, 2, 1, 0, true, 2.5, 0.3, "none", "", true},
};

struct Prepared {
  std::unique_ptr<DecoderModel> model;
  std::vector<int32_t> tokens, targets;
};

constexpr int64_t kBatch = 2, kSeqLen = 11;

Prepared Prepare(const Case& c, const fs::path& dir) {
  Prepared p;
  auto ac = ParseActivationCheckpoint(c.ac_mode, c.ac_option);
  auto model =
      DecoderModel::Create(ConfigOf(c), *ac, ModelCompute{}, PipelinePlan{}, Qwen3Family());
  EXPECT_TRUE(model.ok()) << model.status();
  p.model = std::move(*model);
  p.model->Initialize(42);
  // Norm weights off 1 and a bias off 0, so that their effects are tested too; the bias large
  // enough to change some tokens' choice.
  const Arena& params = p.model->params();
  for (int i = 0; i < params.size(); ++i) {
    float* w = params.at(i).data<float>();
    if (params.name(i).find("norm") != std::string::npos) {
      for (int64_t j = 0; j < params.at(i).numel(); ++j) w[j] = 1.0f + 0.1f * std::sin(j + i);
    } else if (params.name(i).find("expert_bias") != std::string::npos) {
      for (int64_t j = 0; j < params.at(i).numel(); ++j) {
        w[j] = static_cast<float>(c.bias * std::sin(3.0 * j + i));
      }
    }
  }
  const int64_t n = kBatch * kSeqLen, vocab = p.model->config().vocab_size;
  for (int64_t i = 0; i < n; ++i) {
    p.tokens.push_back(static_cast<int32_t>((i * 37 + 11) % vocab));
    p.targets.push_back(static_cast<int32_t>((i * 53 + 7) % vocab));
  }
  p.targets[n / 2] = kIgnoreIndex;
  reference::WriteModel(ConfigOf(c), *p.model, kBatch, kSeqLen, dir);
  WriteBinary(dir / "tokens.bin", p.tokens.data(), n);
  WriteBinary(dir / "targets.bin", p.targets.data(), n);
  return p;
}

TEST(Qwen3ReferenceTest, MatchesPyTorch) {
  ASSERT_TRUE(reference::HaveTorch()) << reference::kNoTorch;
  const fs::path root =
      fs::path(testing::TempDir()) / absl::StrCat("titan_qwen3_reference_", getpid());
  std::vector<Prepared> prepared;
  std::string command =
      absl::StrCat("/usr/bin/python3 ", TITAN_SOURCE_DIR, "/tests/reference/qwen3_reference.py");
  for (const Case& c : kCases) {
    prepared.push_back(Prepare(c, root / c.name));
    absl::StrAppend(&command, " ", (root / c.name).string());
  }
  ASSERT_EQ(std::system(command.c_str()), 0) << "the reference failed: " << command;

  for (size_t k = 0; k < std::size(kCases); ++k) {
    const Case& c = kCases[k];
    SCOPED_TRACE(c.name);
    Prepared& p = prepared[k];
    const fs::path dir = root / c.name;
    auto loss = p.model->Forward(p.tokens.data(), p.targets.data(), kBatch, kSeqLen);
    ASSERT_TRUE(loss.ok()) << loss.status();
    const std::vector<float> ref_logits = ReadFloats(dir / "logits.bin");
    ASSERT_EQ(ref_logits.size(), static_cast<size_t>(p.model->logits().numel()));
    const float ref_loss = ReadFloats(dir / "loss.bin").at(0);
    const double loss_error = std::fabs(*loss - ref_loss) / std::fabs(ref_loss);
    const double logits_error = RelativeError(p.model->logits().data_as<const float>(),
                                              ref_logits.data(), ref_logits.size());
    EXPECT_LT(loss_error, 1e-5) << *loss << " vs " << ref_loss;
    EXPECT_LT(logits_error, 1e-5);
    ASSERT_TRUE(p.model->Backward().ok());
    const std::vector<float> ref_grads = ReadFloats(dir / "grads.bin");
    const Arena& grads = p.model->grads();
    size_t offset = 0;
    double worst = 0;
    for (int i = 0; i < grads.size(); ++i) {
      const size_t count = grads.at(i).numel();
      ASSERT_LE(offset + count, ref_grads.size());
      const float* ours = grads.at(i).data<float>();
      if (grads.name(i).find("expert_bias") != std::string::npos) {
        // A buffer: no gradient in either.
        for (size_t j = 0; j < count; ++j) EXPECT_EQ(ours[j], 0.0f) << grads.name(i);
      } else {
        const double error = RelativeError(ours, &ref_grads[offset], count);
        EXPECT_LT(error, 1e-4) << grads.name(i);
        worst = std::max(worst, error);
      }
      offset += count;
    }
    EXPECT_EQ(offset, ref_grads.size());
    std::printf("%-32s loss %.3g  logits %.3g  worst gradient %.3g (relative errors)\n", c.name,
                loss_error, logits_error, worst);
  }
  fs::remove_all(root);
}

}  // namespace
}  // namespace titan
