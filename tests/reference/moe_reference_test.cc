// The CPU compute's mixture-of-experts kernels against PyTorch (moe_reference.py) on random
// inputs: the router as TorchTitan computes it (softmax and sigmoid, normalized or not, scaled,
// with a bias, with node-limited groups, with ties) and its gradient by autograd; the permutation
// (an expert with no tokens, every token to one expert, k = E, one expert); dispatch (f32 and
// bf16) and combine and their gradients by autograd. Expert ids, counts, slots and moved rows
// equal; f32 results within 1e-6 relative (titan's f32 sums against PyTorch's f64 or f32).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/cpu/cpu_compute.h"
#include "tests/reference/reference_files.h"
#include "titan/float16.h"

namespace titan::reference {
namespace {

constexpr double kTolerance = 1e-6;

struct Case {
  std::string name;
  int64_t n, experts, k, d;
  MoeRouting routing;
  bool bias = false;
  int bias_to = -1;          // an expert the bias sends every token to (-1: a random bias)
  bool tied_logits = false;  // logits on a grid of 0.5, so many tie
};

std::vector<Case> Cases() {
  using Score = MoeRouting::Score;
  return {
      {"qwen3_softmax", 37, 16, 4, 24, {.score = Score::kSoftmax, .top_k = 4}},
      {"softmax_bias_unnormalized_scaled",
       29,
       8,
       2,
       40,
       {.score = Score::kSoftmax, .top_k = 2, .normalize = false, .scale = 2.5f},
       true},
      {"deepseek_v3_groups",
       41,
       32,
       4,
       33,
       {.score = Score::kSigmoid, .top_k = 4, .scale = 2.5f, .groups = 8, .groups_chosen = 3},
       true},
      {"sigmoid_top1", 5, 4, 1, 8, {.score = Score::kSigmoid, .top_k = 1, .normalize = false}},
      {"ties", 12, 6, 3, 5, {.score = Score::kSoftmax, .top_k = 3}, false, -1, true},
      {"k_equals_experts", 9, 4, 4, 6, {.score = Score::kSoftmax, .top_k = 4}},
      {"one_expert", 7, 1, 1, 4, {.score = Score::kSoftmax, .top_k = 1}},
      {"every_token_to_one_expert", 10, 5, 1, 3, {.score = Score::kSigmoid, .top_k = 1}, true, 3},
  };
}

TensorView F32(std::vector<float>& v, std::vector<int64_t> shape) {
  return TensorView{v.data(), DType::kF32, Device{}, std::move(shape), {}};
}
TensorView I32(std::vector<int32_t>& v, std::vector<int64_t> shape) {
  return TensorView{v.data(), DType::kI32, Device{}, std::move(shape), {}};
}

std::vector<float> Random(int64_t count, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = normal(rng);
  return v;
}

// One case's inputs, written for the script, and titan's results.
struct CaseRun {
  std::vector<float> logits, bias, d_weights, x, d_rows, dx, y, combine_weights, out, d_out;
  std::vector<uint16_t> x_bf16;
  std::vector<int32_t> experts, counts, slots;
  std::vector<float> weights, d_logits, rows, d_y, d_combine_weights;
  std::vector<uint16_t> rows_bf16;
};

CaseRun Inputs(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t n = c.n, e = c.experts, k = c.k, d = c.d, m = n * k;
  CaseRun r;
  r.logits = Random(n * e, rng, 2.0f);
  if (c.tied_logits) {
    for (float& v : r.logits) v = std::round(v) / 2;
  }
  r.bias = Random(e, rng, 0.3f);
  if (c.bias_to >= 0) {
    std::fill(r.bias.begin(), r.bias.end(), 0.0f);
    r.bias[c.bias_to] = 10.0f;
  }
  r.d_weights = Random(n * k, rng);
  r.x = Random(n * d, rng);
  for (float v : r.x) r.x_bf16.push_back(F32ToBf16(v));
  r.d_rows = Random(m * d, rng);
  r.dx = Random(n * d, rng);
  r.y = Random(m * d, rng);
  r.combine_weights = Random(n * k, rng);
  r.out = Random(n * d, rng);
  r.d_out = Random(n * d, rng);
  return r;
}

void WriteCase(const Case& c, const CaseRun& r, const fs::path& dir) {
  fs::create_directories(dir);
  const MoeRouting& routing = c.routing;
  std::ofstream(dir / "case.txt") << "n " << c.n << "\nexperts " << c.experts << "\nk " << c.k
                                  << "\nd " << c.d << "\nscore "
                                  << (routing.score == MoeRouting::Score::kSigmoid ? "sigmoid"
                                                                                   : "softmax")
                                  << "\nnormalize " << routing.normalize << "\nscale "
                                  << routing.scale << "\ngroups " << routing.groups
                                  << "\ngroups_chosen " << routing.groups_chosen << "\nbias "
                                  << c.bias << "\n";
  const auto write = [&](const char* name, const auto& v) {
    WriteBinary(dir / name, v.data(), v.size());
  };
  write("logits.bin", r.logits);
  write("bias.bin", r.bias);
  write("d_weights.bin", r.d_weights);
  write("x.bin", r.x);
  write("x_bf16.bin", r.x_bf16);
  write("d_rows.bin", r.d_rows);
  write("dx.bin", r.dx);
  write("y.bin", r.y);
  write("combine_weights.bin", r.combine_weights);
  write("out.bin", r.out);
  write("d_out.bin", r.d_out);
}

// Every kernel on the case's inputs, each after the one whose results it takes.
void RunKernels(const Case& c, CaseRun& r) {
  Compute& cpu = CpuCompute::Get();
  const int64_t n = c.n, e = c.experts, k = c.k, d = c.d, m = n * k;
  r.experts.assign(m, -1);
  r.weights.assign(m, 0.0f);
  ASSERT_TRUE(cpu.MoeRoute(F32(r.logits, {n, e}), c.bias ? F32(r.bias, {e}) : TensorView{},
                           c.routing, I32(r.experts, {n, k}), F32(r.weights, {n, k}))
                  .ok());
  r.d_logits.assign(n * e, 0.0f);
  ASSERT_TRUE(cpu.MoeRouteBackward(F32(r.logits, {n, e}), I32(r.experts, {n, k}),
                                   F32(r.d_weights, {n, k}), c.routing, F32(r.d_logits, {n, e}))
                  .ok());
  r.counts.assign(e, -1);
  r.slots.assign(m, -1);
  ASSERT_TRUE(cpu.MoePermute(I32(r.experts, {n, k}), I32(r.counts, {e}), I32(r.slots, {m})).ok());
  r.rows.assign(m * d, 0.0f);
  ASSERT_TRUE(cpu.MoeDispatch(F32(r.x, {n, d}), I32(r.slots, {m}), F32(r.rows, {m, d})).ok());
  r.rows_bf16.assign(m * d, 0);
  ASSERT_TRUE(cpu.MoeDispatch({r.x_bf16.data(), DType::kBF16, Device{}, {n, d}, {}},
                              I32(r.slots, {m}),
                              {r.rows_bf16.data(), DType::kBF16, Device{}, {m, d}, {}})
                  .ok());
  ASSERT_TRUE(
      cpu.MoeDispatchBackward(F32(r.d_rows, {m, d}), I32(r.slots, {m}), F32(r.dx, {n, d})).ok());
  ASSERT_TRUE(cpu.MoeCombine(F32(r.y, {m, d}), F32(r.combine_weights, {n, k}), I32(r.slots, {m}),
                             F32(r.out, {n, d}))
                  .ok());
  r.d_y.assign(m * d, 0.0f);
  r.d_combine_weights.assign(m, 0.0f);
  ASSERT_TRUE(cpu.MoeCombineBackward(F32(r.d_out, {n, d}), F32(r.y, {m, d}),
                                     F32(r.combine_weights, {n, k}), I32(r.slots, {m}),
                                     F32(r.d_y, {m, d}), F32(r.d_combine_weights, {n, k}))
                  .ok());
}

// Within kTolerance relative, or 1e-12 absolute per element where the result is zero up to
// rounding (one expert per token, normalized: its weight is 1 whatever the logits).
void ExpectClose(const std::vector<float>& ours, const fs::path& file) {
  const std::vector<float> expected = ReadFloats(file);
  ASSERT_EQ(expected.size(), ours.size()) << file;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < ours.size(); ++i) {
    diff += std::pow(static_cast<double>(ours[i]) - expected[i], 2);
    norm += std::pow(static_cast<double>(expected[i]), 2);
  }
  EXPECT_LE(std::sqrt(diff), kTolerance * std::sqrt(norm) + 1e-12 * std::sqrt(ours.size()))
      << file << ": relative error " << std::sqrt(diff / std::max(norm, 1e-300));
}

template <typename T>
void ExpectEqual(const std::vector<T>& ours, const fs::path& file) {
  EXPECT_EQ(ours, ReadBinary<T>(file)) << file;
}

TEST(MoeReference, EveryKernelMatchesPyTorch) {
  if (!HaveTorch()) FAIL() << kNoTorch;
  const fs::path root = fs::path(::testing::TempDir()) / "moe_reference";
  fs::remove_all(root);
  const std::vector<Case> cases = Cases();
  std::vector<CaseRun> runs;
  for (size_t i = 0; i < cases.size(); ++i) {
    runs.push_back(Inputs(cases[i], static_cast<uint32_t>(100 + i)));
    WriteCase(cases[i], runs.back(), root / cases[i].name);
    RunKernels(cases[i], runs.back());  // after writing: dx and out accumulate in place
  }
  const std::string command = std::string("/usr/bin/python3 ") + TITAN_SOURCE_DIR +
                              "/tests/reference/moe_reference.py " + root.string();
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].name);
    const fs::path dir = root / cases[i].name;
    const CaseRun& r = runs[i];
    ExpectEqual(r.experts, dir / "experts.bin");
    ExpectClose(r.weights, dir / "weights.bin");
    ExpectClose(r.d_logits, dir / "d_logits.bin");
    ExpectEqual(r.counts, dir / "counts.bin");
    ExpectEqual(r.slots, dir / "slots.bin");
    ExpectEqual(r.rows, dir / "rows.bin");
    ExpectEqual(r.rows_bf16, dir / "rows_bf16.bin");
    ExpectClose(r.dx, dir / "dx_after.bin");
    ExpectClose(r.out, dir / "out_after.bin");
    ExpectClose(r.d_y, dir / "d_y.bin");
    ExpectClose(r.d_combine_weights, dir / "d_combine_weights.bin");
  }
}

// The cases exercise what they are named for: the bias and the groups each move some token's
// choice, the ties are there, and one case sends every token to one expert.
TEST(MoeReference, TheCasesCoverWhatTheyAreNamedFor) {
  const auto route = [](const Case& c, CaseRun& r, bool bias, int64_t groups) {
    MoeRouting routing = c.routing;
    routing.groups = groups;
    routing.groups_chosen = std::min(routing.groups_chosen, groups);
    std::vector<int32_t> experts(c.n * c.k);
    std::vector<float> weights(c.n * c.k);
    EXPECT_TRUE(CpuCompute::Get()
                    .MoeRoute(F32(r.logits, {c.n, c.experts}),
                              bias ? F32(r.bias, {c.experts}) : TensorView{}, routing,
                              I32(experts, {c.n, c.k}), F32(weights, {c.n, c.k}))
                    .ok());
    return experts;
  };
  for (size_t i = 0; i < Cases().size(); ++i) {
    const Case c = Cases()[i];
    SCOPED_TRACE(c.name);
    CaseRun r = Inputs(c, static_cast<uint32_t>(100 + i));
    if (c.bias && c.bias_to < 0) {
      EXPECT_NE(route(c, r, true, c.routing.groups), route(c, r, false, c.routing.groups));
    }
    if (c.routing.groups > 1) {
      EXPECT_NE(route(c, r, c.bias, c.routing.groups), route(c, r, c.bias, 1));
    }
    if (c.tied_logits) {
      int ties = 0;
      for (int64_t t = 0; t < c.n; ++t) {
        std::vector<float> row(r.logits.begin() + t * c.experts,
                               r.logits.begin() + (t + 1) * c.experts);
        std::sort(row.begin(), row.end());
        ties += std::adjacent_find(row.begin(), row.end()) != row.end();
      }
      EXPECT_GT(ties, c.n / 2);
    }
    if (c.bias_to >= 0) {
      RunKernels(c, r);
      std::vector<int32_t> want(c.experts, 0);
      want[c.bias_to] = static_cast<int32_t>(c.n * c.k);
      EXPECT_EQ(r.counts, want);
    }
  }
}

}  // namespace
}  // namespace titan::reference
