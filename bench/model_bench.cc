// Times each model kernel (forward and backward) at the ~34M config's shapes, and a whole
// forward + backward of the debugmodel and the ~34M config. One line per row:
//   name <TAB> forward ms <TAB> backward ms
// bench/model_bench.py runs this next to the same work in PyTorch; see docs/benchmarks.md.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

#include "core/model/decoder_model.h"
#include "core/tensor/attention.h"
#include "core/tensor/cross_entropy.h"
#include "core/tensor/embedding.h"
#include "core/tensor/matmul.h"
#include "core/tensor/rmsnorm.h"
#include "core/tensor/rope.h"
#include "core/tensor/swiglu.h"

namespace titan {
namespace {

constexpr int kRepeats = 5;

double MedianMs(const std::function<void()>& work, int repeats = kRepeats) {
  work();  // warm-up: page faults, thread pools
  std::vector<double> ms;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    work();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  return ms[ms.size() / 2];
}

std::vector<float> Random(int64_t n, float scale = 1.0f) {
  std::mt19937 engine(1);
  std::normal_distribution<float> normal(0, scale);
  std::vector<float> x(n);
  for (float& v : x) v = normal(engine);
  return x;
}

void Row(const char* name, double forward_ms, double backward_ms) {
  std::printf("%s\t%.3f\t%.3f\n", name, forward_ms, backward_ms);
}

void Kernels() {
  const int64_t b = 4, t = 512, d = 512, f = 1536, v = 8192, heads = 8, kv_heads = 4, hd = 64;
  const int64_t n = b * t;
  auto x = Random(n * d), w = Random(f * d, 0.02f), y = Random(n * f), dy = Random(n * f);
  std::vector<float> dx(n * d), dw(f * d), out(n * f);
  Row("matmul 2048x512x1536",
      MedianMs([&] { MatmulForward(out.data(), x.data(), w.data(), n, d, f); }), MedianMs([&] {
        MatmulBackward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), n, d, f);
      }));

  auto norm_w = Random(d);
  std::vector<float> normed(n * d), rstd(n);
  Row("rmsnorm 2048x512",
      MedianMs([&] { RmsNormForward(normed.data(), rstd.data(), x.data(), norm_w.data(), n, d); }),
      MedianMs([&] {
        RmsNormBackward(dx.data(), dw.data(), x.data(), x.data(), norm_w.data(), rstd.data(), n, d);
      }));

  std::vector<float> cos(t * hd / 2), sin(t * hd / 2);
  RopeTable(cos.data(), sin.data(), t, hd, RopeConfig{});
  auto q = Random(n * heads * hd);
  Row("rope 4x512x8x64",
      MedianMs([&] { RopeForward(q.data(), cos.data(), sin.data(), b, t, heads, hd); }),
      MedianMs([&] { RopeBackward(q.data(), cos.data(), sin.data(), b, t, heads, hd); }));

  const AttentionShape shape{b, t, heads, kv_heads, hd};
  auto k = Random(n * kv_heads * hd), val = Random(n * kv_heads * hd),
       dout = Random(n * heads * hd);
  std::vector<float> att(n * heads * hd), lse(b * heads * t), dq(att.size()), dk(k.size()),
      dv(k.size());
  Row("attention 4x512 h8 kv4 d64", MedianMs([&] {
        AttentionForward(att.data(), lse.data(), q.data(), k.data(), val.data(), shape);
      }),
      MedianMs([&] {
        AttentionBackward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(),
                          val.data(), att.data(), lse.data(), shape);
      }));

  std::vector<float> da(n * f), db(n * f);
  Row("swiglu 2048x1536", MedianMs([&] { SwiGluForward(out.data(), y.data(), dy.data(), n * f); }),
      MedianMs(
          [&] { SwiGluBackward(da.data(), db.data(), out.data(), y.data(), dy.data(), n * f); }));

  auto logits = Random(n * v);
  std::vector<float> dlogits(n * v), loss_lse(n);
  std::vector<int32_t> targets(n);
  for (int64_t i = 0; i < n; ++i) targets[i] = static_cast<int32_t>((i * 31) % v);
  Row("cross_entropy 2048x8192",
      MedianMs([&] { CrossEntropyForward(loss_lse.data(), logits.data(), targets.data(), n, v); }),
      MedianMs([&] {
        CrossEntropyBackward(dlogits.data(), logits.data(), loss_lse.data(), targets.data(), n, v,
                             1.0f);
      }));

  auto table = Random(v * d);
  std::vector<float> dtable(v * d);
  Row("embedding 2048x512 v8192",
      MedianMs([&] { EmbeddingForward(normed.data(), targets.data(), table.data(), n, d); }),
      MedianMs([&] { EmbeddingBackward(dtable.data(), x.data(), targets.data(), n, d); }));
}

void Model(const char* name, const LlamaConfig& config, int64_t b, int64_t t) {
  auto model = DecoderModel::Create(config);
  if (!model.ok()) {
    std::fprintf(stderr, "%s: %s\n", name, model.status().ToString().c_str());
    return;
  }
  if (absl::Status init = (*model)->Initialize(0); !init.ok()) {
    std::fprintf(stderr, "%s: %s\n", name, init.ToString().c_str());
    return;
  }
  std::vector<int32_t> tokens(b * t), targets(b * t);
  for (int64_t i = 0; i < b * t; ++i) {
    tokens[i] = static_cast<int32_t>((i * 37) % config.vocab_size);
    targets[i] = static_cast<int32_t>((i * 53 + 1) % config.vocab_size);
  }
  auto forward = [&] { (void)(*model)->Forward(tokens.data(), targets.data(), b, t); };
  const double forward_ms = MedianMs(forward, 3);
  const double step_ms = MedianMs(
      [&] {
        forward();
        (void)(*model)->Backward();
      },
      3);
  Row(name, forward_ms, step_ms - forward_ms);
}

}  // namespace
}  // namespace titan

int main() {
  std::fprintf(stderr, "titan model bench: %d OpenMP threads\n", omp_get_max_threads());
  titan::Kernels();
  titan::LlamaConfig debug;  // debugmodel
  titan::Model("model debugmodel b4 t512", debug, 4, 512);
  titan::LlamaConfig m34;
  m34.dim = 512, m34.n_layers = 8, m34.n_heads = 8, m34.n_kv_heads = 4, m34.vocab_size = 8192;
  titan::Model("model 34M b4 t512", m34, 4, 512);
  return 0;
}
