// The embedding backward's own code, run on the CPU by cuda_emulation.h, against CpuCompute bit
// for bit at several bucket counts; and how many buckets a GPU gets.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "core/cpu/cpu_compute.h"

// The emulation redefines CUDA's qualifiers: it comes after every other header but the kernels'.
#include "cuda_emulation.h"
// The kernels, compiled for the emulation.
#include "embedding_kernels.cuh"

namespace titan::cuda {
namespace {

std::vector<float> Random(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = normal(rng);
  return x;
}

TEST(EmbeddingKernelsOnTheCpu, BackwardAddsEachRowInTokenOrderAsTheCpuDoes) {
  // 600 tokens (three chunks of 256) of a table shard of rows [40, 90), 300 columns (two blocks
  // of columns): many repeats, some tokens of other shards.
  const int64_t n = 600, c = 300, rows = 50, first_row = 40;
  std::mt19937 rng(3);
  std::vector<int32_t> tokens(n);
  for (int32_t& t : tokens)
    t = static_cast<int32_t>(rng() % 12 == 0 ? rng() % 200 : 40 + rng() % 60);
  std::vector<float> dout = Random(n * c, 4), cpu = Random(rows * c, 5);
  const std::vector<float> initial = cpu;
  ASSERT_TRUE(CpuCompute::Get()
                  .EmbeddingBackward(TensorView{tokens.data(), DType::kI32, Device{}, {n}, {}},
                                     FlatF32(dout.data(), n * c), first_row,
                                     TensorView{cpu.data(), DType::kF32, Device{}, {rows, c}, {}})
                  .ok());
  for (int64_t buckets : {1, 3, 7, 50}) {
    for (bool reverse : {false, true}) {
      emulation::set_reverse_order(reverse);
      std::vector<float> dtable = initial;
      ASSERT_EQ(embedding::RunBackward(emulation::Launcher{}, dtable.data(),
                                       ActivationIn{dout.data(), false}, tokens.data(), n, c,
                                       first_row, rows, buckets),
                cudaSuccess);
      EXPECT_EQ(dtable, cpu) << buckets << " buckets" << (reverse ? ", fibers reversed" : "");
    }
  }
  emulation::set_reverse_order(false);
}

TEST(EmbeddingKernelsOnTheCpu, BucketsFillTheGpu) {
  // Llama 3 1B's table (2048 wide) on an H100 (132 SMs): 132 buckets of 8 column blocks, 1056
  // blocks of 256 threads, 2048 per SM; the old kernel had 8 blocks.
  EXPECT_EQ(embedding::BackwardBuckets(2048, 128256, 132), 132);
  EXPECT_EQ(embedding::BackwardBuckets(2048, 128256, 108), 108);  // A100
  EXPECT_EQ(embedding::BackwardBuckets(300, 128256, 132), 528);   // 512 threads of columns
  EXPECT_EQ(embedding::BackwardBuckets(2048, 20, 132), 20);       // at most one bucket per row
  EXPECT_EQ(embedding::BackwardBuckets(8, 1 << 20, 132), embedding::kMaxBuckets);
  EXPECT_EQ(embedding::BackwardBuckets(0, 10, 132), 1);
  EXPECT_EQ(embedding::BackwardBuckets(2048, 0, 132), 1);
}

}  // namespace
}  // namespace titan::cuda
