// titan's deepseek_v3 family against the PyTorch reference (deepseek_v3_reference.py, a
// transcription of TorchTitan's deepseek_v3 model): multi-head latent attention with low-rank and
// plain queries, values narrower than queries and keys (padded for the attention kernel) or as
// wide, YaRN RoPE and its softmax scale on and off; a dense first block, then experts with
// sigmoid or softmax scores, node-limited group routing, shared experts, a route scale and a bias
// that changes the choice; every checkpointing mode. In f32: logits and loss within 1e-5
// relative error, every gradient within 1e-4 (relative norm), as the Llama and Qwen3 tests.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

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
  int64_t q_lora_rank, v_head_dim;
  double yarn_factor;
  int64_t groups, groups_chosen;
  bool sigmoid, normalize;
  double route_scale, bias;  // bias: the amplitude of the experts' bias (0: none)
  const char* ac_mode;
  const char* ac_option;
};

LlamaConfig ConfigOf(const Case& c) {
  LlamaConfig config = *DeepSeekV3Family().Flavor("debugmodel");
  config.dim = 32, config.n_layers = 3, config.n_heads = 4, config.n_kv_heads = 4;
  config.vocab_size = 53, config.explicit_hidden_dim = 40;
  config.mla.q_lora_rank = c.q_lora_rank, config.mla.kv_lora_rank = 24;
  config.mla.qk_nope_head_dim = 8, config.mla.qk_rope_head_dim = 8;
  config.mla.v_head_dim = c.v_head_dim, config.explicit_head_dim = config.mla.qk_head_dim();
  // The ramp between beta_fast's and beta_slow's dimensions falls inside the 4 rotated pairs.
  config.yarn.factor = c.yarn_factor, config.yarn.original_seq_len = 4096;
  config.yarn.mscale = 0.7;
  MoeConfig& m = config.moe;
  m.experts = 8, m.top_k = 3, m.hidden_dim = 24, m.shared_experts = 1, m.dense_layers = 1;
  m.groups = c.groups, m.groups_chosen = c.groups_chosen;
  m.sigmoid = c.sigmoid, m.normalize = c.normalize, m.route_scale = c.route_scale;
  m.load_balance_coeff = c.bias > 0 ? 1e-3 : 0;
  return config;
}

const Case kCases[] = {
    {"low_rank_q_yarn_groups", 16, 6, 40, 4, 2, true, true, 2.5, 0.3, "none", ""},
    {"plain_q_yarn_softmax", 0, 6, 40, 1, 1, false, false, 1.0, 0, "full", ""},
    {"low_rank_q_no_yarn_wide_v", 16, 16, 1, 2, 1, true, true, 1.0, 0.2, "selective", "op"},
    {"plain_q_yarn_groups_selective", 0, 10, 40, 4, 3, true, true, 2.5, 0.3, "selective", "2"},
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
      DecoderModel::Create(ConfigOf(c), *ac, ModelCompute{}, PipelinePlan{}, DeepSeekV3Family());
  EXPECT_TRUE(model.ok()) << model.status();
  p.model = std::move(*model);
  EXPECT_TRUE(p.model->Initialize(42).ok());
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
  const LlamaConfig config = ConfigOf(c);
  reference::WriteModel(config, *p.model, kBatch, kSeqLen, dir);
  std::ofstream(dir / "config.txt", std::ios::app)
      << std::scientific << "q_lora_rank " << config.mla.q_lora_rank << "\nkv_lora_rank "
      << config.mla.kv_lora_rank << "\nqk_nope_head_dim " << config.mla.qk_nope_head_dim
      << "\nqk_rope_head_dim " << config.mla.qk_rope_head_dim << "\nv_head_dim "
      << config.mla.v_head_dim << "\nrope_factor " << config.yarn.factor << "\noriginal_seq_len "
      << config.yarn.original_seq_len << "\nbeta_fast " << config.yarn.beta_fast << "\nbeta_slow "
      << config.yarn.beta_slow << "\nmscale " << config.yarn.mscale << "\ngroups "
      << config.moe.groups << "\ngroups_chosen " << config.moe.groups_chosen << "\n";
  WriteBinary(dir / "tokens.bin", p.tokens.data(), n);
  WriteBinary(dir / "targets.bin", p.targets.data(), n);
  return p;
}

TEST(DeepSeekV3ReferenceTest, MatchesPyTorch) {
  ASSERT_TRUE(reference::HaveTorch()) << reference::kNoTorch;
  const fs::path root =
      fs::path(testing::TempDir()) / absl::StrCat("titan_deepseek_v3_reference_", getpid());
  std::vector<Prepared> prepared;
  std::string command = absl::StrCat("/usr/bin/python3 ", TITAN_SOURCE_DIR,
                                     "/tests/reference/deepseek_v3_reference.py");
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
