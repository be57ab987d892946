// titan's qwen3 family against the PyTorch reference (qwen3_reference.py): QK-norm with a head
// size apart from dim / n_heads, and mixtures of experts (softmax and sigmoid scores, a bias that
// changes the choice, shared experts, dense first layers, one expert, every checkpointing mode,
// TorchTitan's forced round-robin choice, DeepSeek-V3's sequence-wise auxiliary loss).
// In f32: logits and loss within 1e-5 relative error, every gradient within 1e-4 (relative norm),
// as the Llama reference test; with bf16 matmuls and with the routed experts in Float8 (rowwise),
// against the reference computing the same, within the bounds stated at those tests.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "core/model/decoder_model.h"
#include "core/runtime/plugin_registry.h"
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
  double aux_loss_alpha = 0;   // DeepSeek-V3's sequence-wise auxiliary loss
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
  config.moe.aux_loss_alpha = c.aux_loss_alpha;
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
    // Large weights, so that the auxiliary losses' gradients weigh in the comparison.
    {"aux_loss_softmax", 4, 2, 0, 0, false, 1.0, 0, "full", "", false, 0.5},
    {"aux_loss_sigmoid_shared_bias", 6, 3, 1, 1, true, 2.5, 0.3, "none", "", false, 0.3},
};

// How titan computes and the reference emulates: f32; bf16 matmuls (operands rounded to bf16,
// products summed in f32); or f32 with the routed experts in Float8 by the rowwise recipe (every
// linear layer kept in high precision by float8.filter_fqns, so that only the grouped GEMMs
// change).
enum class Precision { kF32, kBf16, kFloat8Experts };

struct Tolerances {
  double loss, logits, gradient;  // relative errors (logits and gradients: of the norm)
};

struct Prepared {
  std::unique_ptr<DecoderModel> model;
  std::vector<int32_t> tokens, targets;
};

constexpr int64_t kBatch = 2, kSeqLen = 11;

// The rowwise plugin, as titan-run loads it, keeping every linear layer in high precision.
std::unique_ptr<Float8Plugin> RowwiseExpertsOnly() {
  static auto registry = PluginRegistry::Discover({TITAN_BUILD_PLUGIN_DIR});
  EXPECT_TRUE(registry.ok()) << registry.status();
  auto plugin = (*registry)->Create<Float8Plugin>("rowwise");
  EXPECT_TRUE(plugin.ok()) << plugin.status();
  const std::vector<std::string> linears = {"attention", "feed_forward", "shared_experts",
                                            "output"};
  EXPECT_TRUE(
      (*plugin)
          ->Configure(ConfigView("float8", {{"filter_fqns", {ConfigValue(linears), "t.toml"}}}))
          .ok());
  return std::move(*plugin);
}

Prepared Prepare(const Case& c, const fs::path& dir, Precision precision) {
  Prepared p;
  auto ac = ParseActivationCheckpoint(c.ac_mode, c.ac_option);
  LlamaConfig config = ConfigOf(c);
  // Float8 needs each expert's [out, in] divisible by 16.
  if (precision == Precision::kFloat8Experts) config.moe.hidden_dim = 32;
  const DType matmul = precision == Precision::kBf16 ? DType::kBF16 : DType::kF32;
  auto model = DecoderModel::Create(config, *ac, ModelCompute{nullptr, matmul}, PipelinePlan{},
                                    Qwen3Family());
  EXPECT_TRUE(model.ok()) << model.status();
  p.model = std::move(*model);
  if (precision == Precision::kFloat8Experts) {
    const std::unique_ptr<Float8Plugin> plugin = RowwiseExpertsOnly();
    auto choices = p.model->ConvertToFloat8(*plugin);
    EXPECT_TRUE(choices.ok()) << choices.status();
    int experts = 0;
    for (const Float8LinearChoice& choice : *choices) {
      EXPECT_EQ(choice.outcome,
                choice.grouped ? Float8LinearChoice::kFloat8 : Float8LinearChoice::kFiltered)
          << choice.fqn;
      experts += choice.grouped;
    }
    EXPECT_EQ(experts, 3 * (config.n_layers - config.moe.dense_layers));
  }
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
  reference::WriteModel(config, *p.model, kBatch, kSeqLen, dir);
  WriteBinary(dir / "tokens.bin", p.tokens.data(), n);
  WriteBinary(dir / "targets.bin", p.targets.data(), n);
  return p;
}

// Runs the cases (those with experts, for Float8) through titan and the reference (with `flag`)
// and compares them.
void CompareWithPyTorch(Precision precision, const char* flag, const Tolerances& tolerance) {
  ASSERT_TRUE(reference::HaveTorch()) << reference::kNoTorch;
  const fs::path root =
      fs::path(testing::TempDir()) / absl::StrCat("titan_qwen3_reference_", getpid(), "_", flag);
  std::vector<const Case*> cases;
  for (const Case& c : kCases) {
    if (precision != Precision::kFloat8Experts || c.experts > 0) cases.push_back(&c);
  }
  std::vector<Prepared> prepared;
  std::string command = absl::StrCat("/usr/bin/python3 ", TITAN_SOURCE_DIR,
                                     "/tests/reference/qwen3_reference.py ", flag);
  for (const Case* c : cases) {
    prepared.push_back(Prepare(*c, root / c->name, precision));
    absl::StrAppend(&command, " ", (root / c->name).string());
  }
  ASSERT_EQ(std::system(command.c_str()), 0) << "the reference failed: " << command;

  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = *cases[k];
    SCOPED_TRACE(c.name);
    Prepared& p = prepared[k];
    const fs::path dir = root / c.name;
    auto loss = p.model->Forward(p.tokens.data(), p.targets.data(), kBatch, kSeqLen);
    ASSERT_TRUE(loss.ok()) << loss.status();
    const std::vector<float> ref_logits = ReadFloats(dir / "logits.bin");
    ASSERT_EQ(ref_logits.size(), static_cast<size_t>(p.model->logits().numel()));
    const float ref_loss = ReadFloats(dir / "loss.bin").at(0);
    const float* logits = p.model->logits().data_as<const float>();
    const double loss_error = std::fabs(*loss - ref_loss) / std::fabs(ref_loss);
    const double logits_error = RelativeError(logits, ref_logits.data(), ref_logits.size());
    EXPECT_LT(loss_error, tolerance.loss) << *loss << " vs " << ref_loss;
    EXPECT_LT(logits_error, tolerance.logits);
    // With the experts in Float8, how far titan's results are from the same model's with f32
    // experts: the logits (a small move at initialization, where the experts' outputs are small
    // beside the residual stream) and the routed experts' gradients (the least moved of them).
    double logits_moved = 0, experts_moved = 1;
    std::vector<float> high_grads;
    if (precision == Precision::kFloat8Experts) {
      const std::vector<float> high = ReadFloats(dir / "logits_high.bin");
      ASSERT_EQ(high.size(), ref_logits.size());
      logits_moved = RelativeError(logits, high.data(), high.size());
      high_grads = ReadFloats(dir / "grads_high.bin");
    }
    ASSERT_TRUE(p.model->Backward().ok());
    // The sequence-wise auxiliary losses, which the gradients below include.
    const double aux = p.model->TakeAuxLoss(), ref_aux = ReadFloats(dir / "aux_loss.bin").at(0);
    if (c.aux_loss_alpha > 0) {
      EXPECT_GT(ref_aux, 0);
      EXPECT_LT(std::fabs(aux - ref_aux) / ref_aux, tolerance.logits) << aux << " vs " << ref_aux;
    } else {
      EXPECT_EQ(aux, 0.0);
    }
    const std::vector<float> ref_grads = ReadFloats(dir / "grads.bin");
    ASSERT_TRUE(high_grads.empty() || high_grads.size() == ref_grads.size());
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
        EXPECT_LT(error, tolerance.gradient) << grads.name(i);
        worst = std::max(worst, error);
        if (!high_grads.empty() && grads.name(i).find(".moe.experts.") != std::string::npos) {
          experts_moved = std::min(experts_moved, RelativeError(ours, &high_grads[offset], count));
        }
      }
      offset += count;
    }
    EXPECT_EQ(offset, ref_grads.size());
    std::printf("%-14s %-32s loss %.3g  logits %.3g  worst gradient %.3g (relative errors)\n",
                flag[0] != 0 ? flag + 2 : "f32", c.name, loss_error, logits_error, worst);
    if (precision == Precision::kFloat8Experts) {
      // The experts did run in Float8: far beyond the tolerances from the f32 experts' results.
      EXPECT_GT(logits_moved, 10 * logits_error);
      EXPECT_GT(experts_moved, 10 * tolerance.gradient);
      std::printf("%-47s Float8 moved the logits %.3g, the experts' gradients >= %.3g\n", "",
                  logits_moved, experts_moved);
    }
  }
  fs::remove_all(root);
}

TEST(Qwen3ReferenceTest, MatchesPyTorch) {
  CompareWithPyTorch(Precision::kF32, "", Tolerances{1e-5, 1e-5, 1e-4});
}

// bf16 matmuls (the router's and the experts' grouped GEMMs among them) against the reference
// computing the same: only the order of f32 sums differs, except where that moves a value across
// a bf16 rounding boundary (one bf16 step, 2^-8 relative, for that element). Hence f32's loss
// bound, and, as for Llama, 1e-4 for the logits and 1e-3 for each gradient's norm.
TEST(Qwen3ReferenceTest, Bf16MatchesTheReferenceWithBf16Operands) {
  CompareWithPyTorch(Precision::kBf16, "--bf16-operands", Tolerances{1e-5, 1e-4, 1e-3});
}

// The routed experts in Float8 (the rowwise plugin) against torchao's recipe emulated per expert
// group (float8_reference.py): the same codes and scales wherever the GEMMs' inputs are equal, so
// only the order of f32 sums differs, as in f32 (measured: loss 1.1e-7, logits 1.3e-7, gradients
// 6e-7), except where that moves a value across an e4m3 rounding boundary, which costs that
// element 2^-4 of itself: hence bf16's bounds. Float8 itself moves the experts' gradients by 4e-2
// or more from f32 experts', checked to be far beyond them.
TEST(Qwen3ReferenceTest, Float8RowwiseExpertsMatchTorchaoEmulated) {
  CompareWithPyTorch(Precision::kFloat8Experts, "--float8-rowwise-experts",
                     Tolerances{1e-5, 1e-4, 1e-3});
}

}  // namespace
}  // namespace titan
