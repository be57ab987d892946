// The CPU attention kernels, f32 (core/tensor/attention.h) against bf16 GEMMs
// (core/tensor/attention_bf16.h), forward and backward, by default at the ~34M config's shapes
// (batch 4, seq_len 512, 8 heads, 4 kv heads, head_dim 64). One line per kernel:
//   name <TAB> forward ms <TAB> backward ms      (the median of --repeats runs after a warm-up)
// and the bf16 GEMM's path on stderr. --cpu_time 1 times the process's CPU time instead of wall
// time. See docs/benchmarks.md for the command and figures.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/tensor/attention.h"
#include "core/tensor/attention_bf16.h"
#include "core/tensor/bf16_gemm.h"

namespace titan {
namespace {

// Wall time, or with cpu_time the process's CPU time (all threads), which leaves out the time a
// loaded machine's other work takes the cores.
double NowMs(bool cpu_time) {
  timespec now;
  clock_gettime(cpu_time ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &now);
  return now.tv_sec * 1e3 + now.tv_nsec * 1e-6;
}

double MedianMs(const std::function<void()>& work, int64_t repeats, bool cpu_time) {
  work();  // warm-up: page faults, thread pools, oneDNN's primitives
  std::vector<double> ms;
  for (int64_t r = 0; r < repeats; ++r) {
    const double start = NowMs(cpu_time);
    work();
    ms.push_back(NowMs(cpu_time) - start);
  }
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  return ms[ms.size() / 2];
}

std::vector<float> Random(int64_t n, uint32_t seed) {
  std::mt19937 engine(seed);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> x(n);
  for (float& v : x) v = normal(engine);
  return x;
}

void Check(const absl::Status& status) {
  if (status.ok()) return;
  std::fprintf(stderr, "titan_attention_bench: %s\n", status.ToString().c_str());
  std::exit(1);
}

int Run(const std::map<std::string, int64_t>& args) {
  const AttentionShape shape{args.at("batch"), args.at("seq_len"), args.at("heads"),
                             args.at("kv_heads"), args.at("head_dim")};
  const int64_t repeats = args.at("repeats");
  const bool cpu_time = args.at("cpu_time") == 1;
  const int64_t q_size = shape.batch * shape.seq_len * shape.heads * shape.head_dim;
  const int64_t kv_size = shape.batch * shape.seq_len * shape.kv_heads * shape.head_dim;
  const auto q = Random(q_size, 1), k = Random(kv_size, 2), v = Random(kv_size, 3);
  const auto dout = Random(q_size, 4);
  std::vector<float> out(q_size), lse(shape.batch * shape.heads * shape.seq_len);
  std::vector<float> dq(q_size), dk(kv_size), dv(kv_size);
  std::fprintf(stderr, "titan attention bench: %d OpenMP threads, %s time; bf16 GEMM %s\n",
               omp_get_max_threads(), cpu_time ? "CPU" : "wall", Bf16GemmPath().c_str());
  const double f32_forward = MedianMs(
      [&] { AttentionForward(out.data(), lse.data(), q.data(), k.data(), v.data(), shape); },
      repeats, cpu_time);
  const double f32_backward = MedianMs(
      [&] {
        AttentionBackward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(),
                          v.data(), out.data(), lse.data(), shape);
      },
      repeats, cpu_time);
  const double bf16_forward = MedianMs(
      [&] {
        Check(AttentionForwardBf16(out.data(), lse.data(), q.data(), k.data(), v.data(), shape));
      },
      repeats, cpu_time);
  const double bf16_backward = MedianMs(
      [&] {
        Check(AttentionBackwardBf16(dq.data(), dk.data(), dv.data(), dout.data(), q.data(),
                                    k.data(), v.data(), out.data(), lse.data(), shape));
      },
      repeats, cpu_time);
  std::printf("attention f32\t%.3f\t%.3f\n", f32_forward, f32_backward);
  std::printf("attention bf16\t%.3f\t%.3f\n", bf16_forward, bf16_backward);
  std::printf("f32 / bf16\t%.2f\t%.2f\n", f32_forward / bf16_forward, f32_backward / bf16_backward);
  return 0;
}

}  // namespace
}  // namespace titan

int main(int argc, char** argv) {
  std::map<std::string, int64_t> args = {{"batch", 4},    {"seq_len", 512}, {"heads", 8},
                                         {"kv_heads", 4}, {"head_dim", 64}, {"repeats", 5},
                                         {"cpu_time", 0}};
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string key = flag.rfind("--", 0) == 0 ? flag.substr(2) : "";
    const int64_t value = i + 1 < argc ? std::atoll(argv[i + 1]) : -1;
    if (!args.count(key) || value < (key == "cpu_time" ? 0 : 1) ||
        (key == "cpu_time" && value > 1)) {
      std::fprintf(stderr,
                   "titan_attention_bench: unknown flag, or a missing or bad value: %s\n"
                   "usage: titan_attention_bench [--batch B] [--seq_len T] [--heads H] "
                   "[--kv_heads K] [--head_dim D] [--repeats R] [--cpu_time 0|1]\n",
                   flag.c_str());
      return 2;
    }
    args[key] = value;
  }
  if (args["heads"] % args["kv_heads"] != 0) {
    std::fprintf(stderr, "titan_attention_bench: --heads %lld is no multiple of --kv_heads %lld\n",
                 static_cast<long long>(args["heads"]), static_cast<long long>(args["kv_heads"]));
    return 2;
  }
  return titan::Run(args);
}
