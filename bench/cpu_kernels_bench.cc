// titan's vector CPU kernels (core/tensor/vector_kernels.h) against the scalar loops they replace,
// on each instruction set this CPU has: `reference` is the scalar code as the core ran it before,
// compiled like the rest of titan (x86-64 baseline, SSE2); the others force Highway's dispatch to
// one target. The model kernels run on the 34M shapes of docs/benchmarks.md (batch 4 x seq_len 512
// = 2048 rows, dim 512, hidden 1536, 8 heads of 64, vocabulary 8192). Relative timings in one
// process, which a shared machine's load disturbs less than a training run. See docs/benchmarks.md
// for the command and figures.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/tensor/adam.h"
#include "core/tensor/cross_entropy.h"
#include "core/tensor/rmsnorm.h"
#include "core/tensor/rope.h"
#include "core/tensor/sgd.h"
#include "core/tensor/swiglu.h"
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

void SgdMomentum(benchmark::State& state, int64_t target) {
  const int64_t n = state.range(0);
  std::vector<float> param = RandomFloats(n, 3), grad = RandomFloats(n, 4), buffer(n, 0.0f);
  SgdUpdate update;
  update.lr = 1e-2;
  update.momentum = 0.9;
  update.step = 2;
  const SgdConstants c = MakeSgdConstants(update);
  UseTarget(target);
  for (auto _ : state) {
    if (target == 0) {
      // The core's loop before the vector kernels.
      const float lr = c.lr, decay = c.decay, mu = c.momentum, keep = c.keep;
      const bool momentum = c.has_momentum, first = c.first, nesterov = c.nesterov;
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) {
        float g = grad[i] + decay * param[i];
        if (momentum) {
          buffer[i] = first ? g : mu * buffer[i] + keep * g;
          g = nesterov ? g + mu * buffer[i] : buffer[i];
        }
        param[i] -= lr * g;
      }
    } else {
      VectorSgdUpdate(c, param.data(), grad.data(), buffer.data(), n);
    }
    benchmark::ClobberMemory();
  }
  // Reads param, grad, buffer; writes param, buffer.
  state.SetBytesProcessed(state.iterations() * n * 5 * sizeof(float));
}

void SumOfSquares(benchmark::State& state, int64_t target) {
  const int64_t n = state.range(0);
  const std::vector<float> x = RandomFloats(n, 5);
  UseTarget(target);
  for (auto _ : state) {
    double sum = 0;
    if (target == 0) {
      // The core's loop before the vector kernels.
#pragma omp parallel for reduction(+ : sum)
      for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
    } else {
      sum = VectorSumOfSquares(x.data(), n);
    }
    benchmark::DoNotOptimize(sum);
  }
  state.SetBytesProcessed(state.iterations() * n * sizeof(float));
}

// The 34M model's shapes.
constexpr int64_t kRows = 2048, kDim = 512, kHidden = 1536, kVocab = 8192, kHeads = 8,
                  kHeadDim = 64;

void SwiGluForwardBench(benchmark::State& state, int64_t target) {
  const int64_t n = kRows * kHidden;
  const std::vector<float> a = RandomFloats(n, 5), b = RandomFloats(n, 6);
  std::vector<float> out(n);
  UseTarget(target);
  for (auto _ : state) {
    if (target == 0) {
      SwiGluForward(out.data(), a.data(), b.data(), n);
    } else {
      VectorSwiGluForward(out.data(), a.data(), b.data(), n);
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * n * 3 * sizeof(float));
}

void SwiGluBackwardBench(benchmark::State& state, int64_t target) {
  const int64_t n = kRows * kHidden;
  const std::vector<float> a = RandomFloats(n, 5), b = RandomFloats(n, 6),
                           dout = RandomFloats(n, 7);
  std::vector<float> da(n, 0.0f), db(n, 0.0f);
  UseTarget(target);
  for (auto _ : state) {
    if (target == 0) {
      SwiGluBackward(da.data(), db.data(), dout.data(), a.data(), b.data(), n);
    } else {
      VectorSwiGluBackward(da.data(), db.data(), dout.data(), a.data(), b.data(), n);
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * n * 7 * sizeof(float));
}

void RmsNormForwardBench(benchmark::State& state, int64_t target) {
  const std::vector<float> x = RandomFloats(kRows * kDim, 8), w = RandomFloats(kDim, 9);
  std::vector<float> out(kRows * kDim), rstd(kRows);
  UseTarget(target);
  for (auto _ : state) {
    if (target == 0) {
      RmsNormForward(out.data(), rstd.data(), x.data(), w.data(), kRows, kDim);
    } else {
      VectorRmsNormForward(out.data(), rstd.data(), x.data(), w.data(), kRows, kDim, kRmsNormEps);
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * kRows * kDim * 2 * sizeof(float));
}

void RmsNormBackwardBench(benchmark::State& state, int64_t target) {
  const std::vector<float> x = RandomFloats(kRows * kDim, 8), w = RandomFloats(kDim, 9);
  const std::vector<float> dout = RandomFloats(kRows * kDim, 10), rstd(kRows, 0.9f);
  std::vector<float> dx(kRows * kDim, 0.0f), dw(kDim, 0.0f);
  UseTarget(target);
  for (auto _ : state) {
    if (target == 0) {
      RmsNormBackward(dx.data(), dw.data(), dout.data(), x.data(), w.data(), rstd.data(), kRows,
                      kDim);
    } else {
      VectorRmsNormBackward(dx.data(), dw.data(), dout.data(), x.data(), w.data(), rstd.data(),
                            kRows, kDim);
    }
    benchmark::ClobberMemory();
  }
  // Reads x and dout twice (the rows, then the weight's columns), reads and writes dx.
  state.SetBytesProcessed(state.iterations() * kRows * kDim * 6 * sizeof(float));
}

// The forward's exp pass (CrossEntropySumExp) and the backward, on logits of a spread like a
// trained model's.
void CrossEntropySumExpBench(benchmark::State& state, int64_t target) {
  std::vector<float> logits = RandomFloats(kRows * kVocab, 11);
  for (float& x : logits) x *= 3.0f;
  std::vector<float> max(kRows), sum(kRows);
  CrossEntropyRowMax(max.data(), logits.data(), kRows, kVocab);
  UseTarget(target);
  for (auto _ : state) {
    if (target == 0) {
      CrossEntropySumExp(sum.data(), logits.data(), max.data(), kRows, kVocab);
    } else {
      VectorCrossEntropySumExp(sum.data(), logits.data(), max.data(), kRows, kVocab);
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * kRows * kVocab * sizeof(float));
}

void CrossEntropyBackwardBench(benchmark::State& state, int64_t target) {
  std::vector<float> logits = RandomFloats(kRows * kVocab, 11);
  for (float& x : logits) x *= 3.0f;
  std::vector<float> lse(kRows), grad(kRows * kVocab);
  CrossEntropyForward(lse.data(), logits.data(), std::vector<int32_t>(kRows, 7).data(), kRows,
                      kVocab);
  const std::vector<int32_t> targets(kRows, 7);
  UseTarget(target);
  for (auto _ : state) {
    if (target == 0) {
      CrossEntropyBackward(grad.data(), logits.data(), lse.data(), targets.data(), kRows, kVocab,
                           1.0f);
    } else {
      VectorCrossEntropyBackward(grad.data(), logits.data(), lse.data(), targets.data(), kRows,
                                 kVocab, 1.0f, 0);
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * kRows * kVocab * 2 * sizeof(float));
}

// Queries' RoPE forward and backward in one iteration.
void RopeBench(benchmark::State& state, int64_t target) {
  const int64_t n = kRows * kHeads * kHeadDim;
  std::vector<float> x = RandomFloats(n, 12);
  std::vector<float> cos(512 * kHeadDim / 2), sin(512 * kHeadDim / 2);
  RopeTable(cos.data(), sin.data(), 512, kHeadDim, RopeConfig{});
  UseTarget(target);
  for (auto _ : state) {
    if (target == 0) {
      RopeForward(x.data(), cos.data(), sin.data(), 4, 512, kHeads, kHeadDim);
      RopeBackward(x.data(), cos.data(), sin.data(), 4, 512, kHeads, kHeadDim);
    } else {
      VectorRopeForward(x.data(), cos.data(), sin.data(), 4, 512, kHeads, kHeadDim);
      VectorRopeBackward(x.data(), cos.data(), sin.data(), 4, 512, kHeads, kHeadDim);
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * n * 4 * sizeof(float));
}

void CrossEntropyRowMaxBench(benchmark::State& state, int64_t target) {
  const std::vector<float> logits = RandomFloats(kRows * kVocab, 13);
  std::vector<float> max(kRows);
  UseTarget(target);
  for (auto _ : state) {
    if (target == 0) {
      // The core's loop before the vector kernels.
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < kRows; ++i) {
        const float* row = logits.data() + i * kVocab;
        float row_max = row[0];
#pragma omp simd reduction(max : row_max)
        for (int64_t j = 1; j < kVocab; ++j) row_max = row[j] > row_max ? row[j] : row_max;
        max[i] = row_max;
      }
    } else {
      VectorCrossEntropyRowMax(max.data(), logits.data(), kRows, kVocab);
    }
    benchmark::DoNotOptimize(max.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * kRows * kVocab * sizeof(float));
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
          std::pair{"AdamW", &AdamW}, std::pair{"SgdMomentum", &SgdMomentum},
          std::pair{"SumOfSquares", &SumOfSquares}}) {
      auto run = fn;
      benchmark::RegisterBenchmark((std::string(kernel) + "/" + name).c_str(),
                                   [run, t](benchmark::State& state) { run(state, t); })
          ->Arg(1 << 16)
          ->Arg(1 << 24)
          ->UseRealTime();
    }
    for (const auto& [kernel, fn] : {std::pair{"SwiGluForward", &SwiGluForwardBench},
                                     std::pair{"SwiGluBackward", &SwiGluBackwardBench},
                                     std::pair{"RmsNormForward", &RmsNormForwardBench},
                                     std::pair{"RmsNormBackward", &RmsNormBackwardBench},
                                     std::pair{"CrossEntropyRowMax", &CrossEntropyRowMaxBench},
                                     std::pair{"CrossEntropySumExp", &CrossEntropySumExpBench},
                                     std::pair{"CrossEntropyBackward", &CrossEntropyBackwardBench},
                                     std::pair{"RopeForwardBackward", &RopeBench}}) {
      auto run = fn;
      benchmark::RegisterBenchmark((std::string(kernel) + "/" + name).c_str(),
                                   [run, t](benchmark::State& state) { run(state, t); })
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
