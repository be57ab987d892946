// titan's vector CPU kernels (core/tensor/vector_kernels.h) against the scalar loops they replace,
// on each instruction set this CPU has: `reference` is the scalar code as the core ran it before,
// compiled like the rest of titan (x86-64 baseline, SSE2); the others force Highway's dispatch to
// one target. Relative timings in one process, which a shared machine's load disturbs less than
// a training run. See docs/benchmarks.md for the command and figures.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/tensor/adam.h"
#include "core/tensor/vector_kernels.h"
#include "hwy/targets.h"
#include "titan/float16.h"

namespace titan {
namespace {

std::vector<float> RandomFloats(int64_t n, uint32_t seed) {
  std::mt19937 random(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(n);
  for (float& value : values) value = normal(random);
  return values;
}

// 0 runs the scalar reference; any other value forces that Highway target.
void UseTarget(int64_t target) {
  hwy::SetSupportedTargetsForTest(target);
  hwy::GetChosenTarget().Update(hwy::SupportedTargets());
}

void CastF32ToBf16(benchmark::State& state, int64_t target) {
  const int64_t n = state.range(0);
  const std::vector<float> in = RandomFloats(n, 1);
  std::vector<uint16_t> out(n);
  UseTarget(target);
  for (auto _ : state) {
    if (target == 0) {
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < n; ++i) out[i] = F32ToBf16(in[i]);
    } else {
      VectorCastF32ToBf16(in.data(), out.data(), n);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * n * (sizeof(float) + sizeof(uint16_t)));
}

void CastBf16ToF32(benchmark::State& state, int64_t target) {
  const int64_t n = state.range(0);
  const std::vector<float> wide = RandomFloats(n, 2);
  std::vector<uint16_t> in(n);
  for (int64_t i = 0; i < n; ++i) in[i] = F32ToBf16(wide[i]);
  std::vector<float> out(n);
  UseTarget(target);
  for (auto _ : state) {
    if (target == 0) {
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < n; ++i) out[i] = Bf16ToF32(in[i]);
    } else {
      VectorCastBf16ToF32(in.data(), out.data(), n);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * n * (sizeof(float) + sizeof(uint16_t)));
}

void AdamW(benchmark::State& state, int64_t target) {
  const int64_t n = state.range(0);
  std::vector<float> param = RandomFloats(n, 3), grad = RandomFloats(n, 4);
  std::vector<float> m(n, 0.0f), v(n, 0.0f);
  AdamUpdate update;
  update.lr = 1e-4;
  update.weight_decay = 0.1;
  const AdamConstants c = MakeAdamConstants(update);
  UseTarget(target);
  for (auto _ : state) {
    if (target == 0) {
      // The core's loop before the vector kernels: the reference, split over the threads.
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) AdamElement(c, param[i], grad[i], m[i], v[i]);
    } else {
      VectorAdamUpdate(c, param.data(), grad.data(), m.data(), v.data(), n);
    }
    benchmark::ClobberMemory();
  }
  // Reads param, grad, m, v; writes param, m, v.
  state.SetBytesProcessed(state.iterations() * n * 7 * sizeof(float));
}

void RegisterAll() {
  std::vector<std::pair<std::string, int64_t>> targets = {{"reference", 0}};
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    targets.emplace_back(hwy::TargetName(target), target);
  }
  for (const auto& [name, target] : targets) {
    const int64_t t = target;
    for (const auto& [kernel, fn] :
         {std::pair{"CastF32ToBf16", &CastF32ToBf16}, std::pair{"CastBf16ToF32", &CastBf16ToF32},
          std::pair{"AdamW", &AdamW}}) {
      auto run = fn;
      benchmark::RegisterBenchmark((std::string(kernel) + "/" + name).c_str(),
                                   [run, t](benchmark::State& state) { run(state, t); })
          ->Arg(1 << 16)
          ->Arg(1 << 24)
          ->UseRealTime();
    }
  }
}

}  // namespace
}  // namespace titan

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  titan::RegisterAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
