// What the synchronous tensor-parallel path pays for multiplying a gathered operand by per-rank
// chunks (Linear::GatheredChunkRows: the rows async TP's ring multiplies one chunk at a time, so
// that both paths give the same bits on any BLAS) instead of by one GEMM: a column-parallel
// layer's forward, the gathered [n, d] input times this rank's [d, f / tp] weight, as one GEMM
// and as tp GEMMs of n / tp rows, through the CPU compute (OpenBLAS in f32, oneDNN in bf16). The
// 34M config's shapes (n = batch 4 x seq_len 512 = 2048 tokens, d = 512, f = the hidden 1536) and
// the async TP bench's (n = 4096, d = 256, f = 768). See docs/benchmarks.md.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "core/cpu/cpu_compute.h"
#include "titan/float16.h"

namespace titan {
namespace {

struct Operands {
  std::vector<float> a32, b32, c;
  std::vector<uint16_t> a16, b16;
};

Operands Make(int64_t n, int64_t d, int64_t f) {
  std::mt19937 random(1);
  std::normal_distribution<float> normal;
  Operands o;
  for (int64_t i = 0; i < n * d; ++i) o.a32.push_back(normal(random));
  for (int64_t i = 0; i < d * f; ++i) o.b32.push_back(normal(random));
  for (float x : o.a32) o.a16.push_back(F32ToBf16(x));
  for (float x : o.b32) o.b16.push_back(F32ToBf16(x));
  o.c.resize(n * f);
  return o;
}

// Arguments: n, d, f, tp, chunked (1: tp GEMMs of n / tp rows; 0: one of n rows), bf16. The
// rank's weight is [f / tp, d].
void BM_ColumnParallelForward(benchmark::State& state) {
  const int64_t n = state.range(0), d = state.range(1), f = state.range(2) / state.range(3);
  const int64_t chunks = state.range(4) != 0 ? state.range(3) : 1, rows = n / chunks;
  const bool bf16 = state.range(5) != 0;
  Operands o = Make(n, d, f);
  const DType dtype = bf16 ? DType::kBF16 : DType::kF32;
  Compute& compute = CpuCompute::Get();
  for (auto _ : state) {
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      void* a = bf16 ? static_cast<void*>(o.a16.data() + chunk * rows * d)
                     : static_cast<void*>(o.a32.data() + chunk * rows * d);
      void* b = bf16 ? static_cast<void*>(o.b16.data()) : static_cast<void*>(o.b32.data());
      const absl::Status status = compute.Gemm(
          TensorView{a, dtype, Device{}, {rows, d}, {}}, false,
          TensorView{b, dtype, Device{}, {f, d}, {}}, true, 1.0f, 0.0f,
          TensorView{o.c.data() + chunk * rows * f, DType::kF32, Device{}, {rows, f}, {}});
      if (!status.ok()) state.SkipWithError(status.ToString().c_str());
    }
  }
  state.counters["GFLOP/s"] = benchmark::Counter(static_cast<double>(2 * n * d * f) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_ColumnParallelForward)
    ->ArgNames({"n", "d", "f", "tp", "chunked", "bf16"})
    ->ArgsProduct({{2048}, {512}, {1536}, {2, 4}, {0, 1}, {0, 1}})
    ->ArgsProduct({{4096}, {256}, {768}, {2, 4}, {0, 1}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace titan

BENCHMARK_MAIN();
