// The attention kernels' own code, run on the CPU by cuda_emulation.h, against CpuCompute: the
// tiling, the causal and chunk masks, the online softmax, the grouped heads and the backward's
// recomputation are checked here on any machine; cuda_compute_test.cc checks the same on a GPU.
// Each shape runs with the fibers of a block in both orders and must give the same bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/cpu/cpu_compute.h"

// The emulation redefines CUDA's qualifiers: it comes after every other header but the kernels'.
#include "cuda_emulation.h"
// The kernels, compiled for the emulation.
#include "attention_kernels.cuh"

namespace titan::cuda {
namespace {

std::vector<float> Random(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = normal(rng);
  return x;
}

TensorView View(std::vector<float>& x) { return FlatF32(x.data(), static_cast<int64_t>(x.size())); }

// Within abs + rel |cpu| (infinities and NaNs equal), at most 5 failures reported.
void ExpectNear(const std::vector<float>& got, const std::vector<float>& cpu, double rel,
                double abs, const std::string& what) {
  ASSERT_EQ(got.size(), cpu.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == cpu[i] || (std::isnan(got[i]) && std::isnan(cpu[i]))) continue;
    const double diff = std::fabs(static_cast<double>(got[i]) - cpu[i]);
    if (!(diff <= abs + rel * std::fabs(cpu[i])) && reported++ < 5) {
      ADD_FAILURE() << what << "[" << i << "]: kernel " << got[i] << " vs cpu " << cpu[i];
    }
  }
}

struct Results {
  std::vector<float> out, lse, dq, dk, dv;
};

// The forward, then the backward from the CPU's forward into gradients that hold values already.
Results RunKernels(const AttentionSpec& spec, const std::vector<float>& q,
                   const std::vector<float>& k, const std::vector<float>& v,
                   const std::vector<float>& dout, const std::vector<float>& cpu_out,
                   const std::vector<float>& cpu_lse, const Results& initial) {
  const AttentionDims dims{spec.batch,
                           spec.seq_len,
                           spec.kv_len,
                           spec.heads,
                           spec.kv_heads,
                           spec.head_dim,
                           spec.q_offset - spec.kv_offset};
  Results r = initial;
  EXPECT_EQ(attention::RunForward(emulation::Launcher{}, dims, q.data(), k.data(), v.data(),
                                  r.out.data(), r.lse.data()),
            cudaSuccess);
  std::vector<float> dots(cpu_lse.size(), std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(attention::RunBackward(emulation::Launcher{}, dims, dout.data(), q.data(), k.data(),
                                   v.data(), cpu_out.data(), cpu_lse.data(), r.dq.data(),
                                   r.dk.data(), r.dv.data(), dots.data()),
            cudaSuccess);
  return r;
}

// The tolerances of cuda_compute_test.cc's attention tests.
void CompareWithCpu(const AttentionSpec& s, uint32_t seed) {
  SCOPED_TRACE(absl::StrCat("b ", s.batch, " t ", s.seq_len, " kv ", s.kv_len, " heads ", s.heads,
                            "/", s.kv_heads, " head_dim ", s.head_dim, " offsets ", s.q_offset, "/",
                            s.kv_offset));
  const int64_t q_size = s.batch * s.seq_len * s.heads * s.head_dim;
  const int64_t kv_size = s.batch * s.kv_len * s.kv_heads * s.head_dim;
  const int64_t rows = s.batch * s.heads * s.seq_len;
  std::vector<float> q = Random(q_size, seed), k = Random(kv_size, seed + 1),
                     v = Random(kv_size, seed + 2), dout = Random(q_size, seed + 3);
  Results cpu{std::vector<float>(q_size), std::vector<float>(rows), Random(q_size, seed + 4),
              Random(kv_size, seed + 5), Random(kv_size, seed + 6)};
  const Results initial{Random(q_size, seed + 7), Random(rows, seed + 8), cpu.dq, cpu.dk, cpu.dv};
  Compute& reference = CpuCompute::Get();
  ASSERT_TRUE(
      reference.AttentionForward(s, View(q), View(k), View(v), View(cpu.out), View(cpu.lse)).ok());
  ASSERT_TRUE(reference
                  .AttentionBackward(s, View(dout), View(q), View(k), View(v), View(cpu.out),
                                     View(cpu.lse), View(cpu.dq), View(cpu.dk), View(cpu.dv))
                  .ok());
  Results runs[2];
  for (bool reverse : {false, true}) {
    emulation::set_reverse_order(reverse);
    runs[reverse] = RunKernels(s, q, k, v, dout, cpu.out, cpu.lse, initial);
  }
  emulation::set_reverse_order(false);
  const Results& got = runs[0];
  ExpectNear(got.out, cpu.out, 1e-5, 2e-6, "out");
  ExpectNear(got.lse, cpu.lse, 1e-5, 2e-6, "lse");
  const double grad_abs = 1e-5 * std::max(1.0, std::sqrt(s.head_dim / 16.0));
  ExpectNear(got.dq, cpu.dq, 1e-5, grad_abs, "dq");
  ExpectNear(got.dk, cpu.dk, 1e-5, grad_abs, "dk");
  ExpectNear(got.dv, cpu.dv, 1e-5, grad_abs, "dv");
  EXPECT_EQ(runs[1].out, got.out) << "the fibers' order changed the forward";
  EXPECT_EQ(runs[1].lse, got.lse);
  EXPECT_EQ(runs[1].dq, got.dq) << "the fibers' order changed the backward";
  EXPECT_EQ(runs[1].dk, got.dk);
  EXPECT_EQ(runs[1].dv, got.dv);
}

TEST(AttentionKernelsOnTheCpu, CausalWithGqaAtOddLengths) {
  CompareWithCpu(
      {.batch = 2, .seq_len = 37, .kv_len = 37, .heads = 4, .kv_heads = 2, .head_dim = 16}, 10);
  CompareWithCpu(
      {.batch = 1, .seq_len = 70, .kv_len = 70, .heads = 4, .kv_heads = 1, .head_dim = 24}, 11);
}

TEST(AttentionKernelsOnTheCpu, HeadDim64And128OverSeveralTiles) {
  CompareWithCpu(
      {.batch = 1, .seq_len = 130, .kv_len = 130, .heads = 2, .kv_heads = 2, .head_dim = 64}, 20);
  CompareWithCpu(
      {.batch = 1, .seq_len = 75, .kv_len = 75, .heads = 4, .kv_heads = 2, .head_dim = 128}, 21);
}

// The shapes of cuda_compute_test.cc's AttentionAcrossTilesAndHeadDimsMatchesTheCpu that the
// tests above do not cover: GQA 4 at head_dim 128, a late chunk over many keys.
TEST(AttentionKernelsOnTheCpu, TheGpuTestsShapes) {
  CompareWithCpu(
      {.batch = 1, .seq_len = 97, .kv_len = 97, .heads = 8, .kv_heads = 2, .head_dim = 128}, 320);
  CompareWithCpu({.batch = 1,
                  .seq_len = 50,
                  .kv_len = 150,
                  .heads = 4,
                  .kv_heads = 1,
                  .head_dim = 128,
                  .q_offset = 100,
                  .kv_offset = 0},
                 340);
}

TEST(AttentionKernelsOnTheCpu, TheLargestHeadDim) {
  CompareWithCpu(
      {.batch = 1, .seq_len = 33, .kv_len = 33, .heads = 2, .kv_heads = 1, .head_dim = 256}, 30);
  CompareWithCpu(
      {.batch = 1, .seq_len = 9, .kv_len = 9, .heads = 2, .kv_heads = 1, .head_dim = 200}, 31);
}

// Context parallelism's chunks: queries at q_offset.. against keys at kv_offset...
TEST(AttentionKernelsOnTheCpu, ChunksWithOffsets) {
  CompareWithCpu({.batch = 1,
                  .seq_len = 20,
                  .kv_len = 40,
                  .heads = 6,
                  .kv_heads = 3,
                  .head_dim = 40,
                  .q_offset = 24,
                  .kv_offset = 16},
                 40);
  CompareWithCpu({.batch = 2,
                  .seq_len = 50,
                  .kv_len = 70,
                  .heads = 2,
                  .kv_heads = 1,
                  .head_dim = 32,
                  .q_offset = 100,
                  .kv_offset = 0},
                 41);
  // Keys after every query but the last few: most rows see nothing.
  CompareWithCpu({.batch = 1,
                  .seq_len = 40,
                  .kv_len = 24,
                  .heads = 2,
                  .kv_heads = 1,
                  .head_dim = 8,
                  .q_offset = 0,
                  .kv_offset = 30},
                 42);
}

TEST(AttentionKernelsOnTheCpu, AChunkThatSeesNoKeyGetsZerosAndMinusInfinity) {
  const AttentionSpec none{.batch = 1,
                           .seq_len = 8,
                           .kv_len = 8,
                           .heads = 2,
                           .kv_heads = 1,
                           .head_dim = 8,
                           .q_offset = 0,
                           .kv_offset = 8};
  CompareWithCpu(none, 50);
  std::vector<float> q = Random(8 * 2 * 8, 51), kv = Random(8 * 8, 52);
  std::vector<float> out = Random(8 * 2 * 8, 53), lse(16, 1.0f);
  const AttentionDims dims{1, 8, 8, 2, 1, 8, -8};
  ASSERT_EQ(attention::RunForward(emulation::Launcher{}, dims, q.data(), kv.data(), kv.data(),
                                  out.data(), lse.data()),
            cudaSuccess);
  for (float x : out) EXPECT_EQ(x, 0.0f);
  for (float x : lse) EXPECT_EQ(x, -std::numeric_limits<float>::infinity());
}

TEST(AttentionKernelsOnTheCpu, MergeFoldsAPartAsTheCpuDoes) {
  const AttentionSpec s{
      .batch = 2, .seq_len = 5, .kv_len = 5, .heads = 3, .kv_heads = 3, .head_dim = 8};
  const int64_t rows = 2 * 5 * 3, size = rows * 8;
  std::vector<float> lse = Random(rows, 60), part_lse = Random(rows, 61);
  lse[0] = part_lse[1] = -std::numeric_limits<float>::infinity();
  lse[2] = part_lse[2] = -std::numeric_limits<float>::infinity();
  std::vector<float> out = Random(size, 62), part_out = Random(size, 63);
  std::vector<float> cpu_out = out, cpu_lse = lse;
  ASSERT_TRUE(CpuCompute::Get()
                  .AttentionMerge(s, View(part_out), View(part_lse), View(cpu_out), View(cpu_lse))
                  .ok());
  const AttentionDims dims{2, 5, 5, 3, 3, 8, 0};
  ASSERT_EQ(attention::RunMerge(emulation::Launcher{}, dims, part_out.data(), part_lse.data(),
                                out.data(), lse.data()),
            cudaSuccess);
  ExpectNear(out, cpu_out, 1e-5, 1e-6, "out");
  ExpectNear(lse, cpu_lse, 1e-5, 1e-6, "lse");
}

}  // namespace
}  // namespace titan::cuda
