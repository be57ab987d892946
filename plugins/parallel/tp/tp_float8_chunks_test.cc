// Async tensor parallelism in Float8: a linear layer's output and input-gradient GEMMs run by
// chunks of rows (Float8Linears::BeginChunks, GemmChunk) give every chunk's rows the bits of the
// whole GEMM's that the synchronous path runs, on ranks made of threads, for the tensorwise and
// rowwise recipes: the all-gather side (the rows' k whole, the other ranks' rows still to come)
// and the reduce-scatter side (the whole rows here, their k split over tp), each rank taking the
// chunks in its own ring order.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "core/cpu/cpu_compute.h"
#include "core/model/float8_linear.h"
#include "core/model/float8_test_matrix.h"
#include "core/model/float8_test_plugin.h"
#include "plugins/parallel/common/thread_comm.h"

namespace titan::tp {
namespace {

using ChunkedGemm = Float8Linears::ChunkedGemm;

constexpr int kRanks = 2;
constexpr int64_t kRowsPerRank = 4, kIn = 32, kOut = 48;

// One rank's GEMM: whole (as the synchronous path runs it) and by chunks in ring order; `a` the
// GEMM's [rows, k] operand as the rank holds it after the gather (or before the reduce-scatter),
// `own` what BeginChunks sees of it.
void ExpectChunksEqualWhole(Float8Linears& linears, ChunkedGemm which, Matrix a, Matrix own,
                            bool gathered, Matrix w, const Float8Split& split, int rank) {
  const int64_t n = which == ChunkedGemm::kOutput ? w.rows : w.columns;
  Matrix whole{a.rows, n, std::vector<float>(a.rows * n, 0.5f)};
  Matrix chunks = whole;
  const Float8Operand weight{w.view(), {}, {}};
  absl::Status ran = which == ChunkedGemm::kOutput
                         ? linears.Forward(a.view(), weight, whole.view(), true, split)
                         : linears.InputGrad(a.view(), weight, whole.view(), split, true);
  ASSERT_TRUE(ran.ok()) << ran;
  ran =
      linears.BeginChunks(which, gathered ? own.view() : a.view(), gathered, a.rows, weight, split);
  ASSERT_TRUE(ran.ok()) << ran;
  for (int step = 0; step < kRanks; ++step) {
    const int64_t first = ((rank - step + kRanks) % kRanks) * kRowsPerRank;
    ran = linears.GemmChunk(a.Rows(first, kRowsPerRank), first, chunks.Rows(first, kRowsPerRank),
                            /*accumulate=*/true);
    ASSERT_TRUE(ran.ok()) << ran;
  }
  for (size_t i = 0; i < whole.values.size(); ++i) {
    ASSERT_EQ(chunks.values[i], whole.values[i]) << "rank " << rank << " element " << i;
  }
}

void RunOnRanks(const Float8Recipe& recipe, bool row_parallel, ChunkedGemm which) {
  const int64_t rows = kRanks * kRowsPerRank;
  // y = x W^T with x [rows, in], W [out, in], dy [rows, out], split by tp as the layer is.
  const Matrix x = Random(rows, kIn, 1), w = Random(kOut, kIn, 2), dy = Random(rows, kOut, 3);
  ThreadGroup group(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      ThreadComm comm(group, r);
      Float8Linears linears(recipe, CpuCompute::Get(), nullptr, {});
      const Float8Split split{row_parallel, &comm, nullptr};
      const int64_t in = row_parallel ? kIn / kRanks : kIn,
                    out = row_parallel ? kOut : kOut / kRanks;
      const Matrix w_rank =
          row_parallel ? w.Block(0, out, r * in, in) : w.Block(r * out, out, 0, in);
      if (which == ChunkedGemm::kOutput) {
        // Column-parallel: x gathered (k whole); row-parallel: x's k split, rows whole.
        const Matrix a = row_parallel ? x.Block(0, rows, r * in, in) : x;
        const Matrix own = a.Block(r * kRowsPerRank, kRowsPerRank, 0, a.columns);
        ExpectChunksEqualWhole(linears, which, a, own, !row_parallel, w_rank, split, r);
      } else {
        // Row-parallel: dy gathered (k = out whole); column-parallel: dy's k split, rows whole.
        const Matrix a = row_parallel ? dy : dy.Block(0, rows, r * out, out);
        const Matrix own = a.Block(r * kRowsPerRank, kRowsPerRank, 0, a.columns);
        ExpectChunksEqualWhole(linears, which, a, own, row_parallel, w_rank, split, r);
      }
    });
  }
  for (std::thread& t : threads) t.join();
}

struct Case {
  const char* name;
  Float8Recipe recipe;
};

TEST(TpFloat8Chunks, EveryChunkGivesTheWholeGemmsBitsOnEachSideOfTheRing) {
  for (const Case& c : {Case{"tensorwise", TensorwiseTestPlugin().Recipe()},
                        Case{"rowwise", RowwiseTestPlugin().Recipe()}}) {
    for (const bool row_parallel : {false, true}) {
      for (const ChunkedGemm which : {ChunkedGemm::kOutput, ChunkedGemm::kGradInput}) {
        SCOPED_TRACE(testing::Message()
                     << c.name << (row_parallel ? " row-parallel " : " column-parallel ")
                     << (which == ChunkedGemm::kOutput ? "output" : "grad_input"));
        RunOnRanks(c.recipe, row_parallel, which);
      }
    }
  }
}

}  // namespace
}  // namespace titan::tp
