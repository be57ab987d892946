// Times titan's training step (forward, backward, gradient clipping and the adamw plugin's
// update: the step titan-run runs) on one model shape, after a warm-up step, and prints one
// line of "key value" pairs for bench/train_throughput.py (activation_mib: the model's planned
// activation memory, no activation checkpointing):
//   titan_train_bench --dim 512 --n_layers 8 --n_heads 8 --n_kv_heads 4 --vocab_size 8192
//                     --seq_len 512 --batch 4 --steps 5
// (each flag optional: the defaults are the debugmodel at seq_len 256, batch 8); --bf16 1 runs the
// matmuls with bf16 operands (training.mixed_precision_param = "bfloat16"). --experts E --top_k K
// --expert_hidden H make every block a mixture of E experts of H features, K per token (the qwen3
// family, QK-norm on); --hidden F sets a dense feed-forward's width (0: Llama's rule); --qwen3 1
// the qwen3 family (QK-norm) for a dense model too.
// --profile_dir DIR runs one more step after the timed ones under the step profiler
// (profiling.enable_profiling) and writes its trace to DIR/iteration_<step>/rank0_trace.json,
// whose `kernel` spans bench/kernel_spans.py sums; the timed steps are not profiled.
// --peak instead prints the f32 matmul rate of this machine (GFLOP/s, best of 2048^3 sgemms).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/model/decoder_model.h"
#include "core/runtime/plugin_registry.h"
#include "core/runtime/profiler.h"
#include "core/runtime/recipe.h"
#include "core/train/metrics.h"
#include "core/train/train_step.h"

namespace titan {
namespace {

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "titan_train_bench: %s\n", what.c_str());
  return 1;
}

int Train(const std::map<std::string, int64_t>& args, const std::string& profile_dir) {
  LlamaConfig config;
  config.dim = args.at("dim"), config.n_layers = args.at("n_layers");
  config.n_heads = args.at("n_heads"), config.n_kv_heads = args.at("n_kv_heads");
  config.vocab_size = args.at("vocab_size");
  config.explicit_hidden_dim = args.at("hidden");
  config.moe.experts = args.at("experts"), config.moe.top_k = args.at("top_k");
  config.moe.hidden_dim = args.at("expert_hidden");
  const bool qwen3 = config.moe.enabled() || args.at("qwen3") != 0;
  config.qk_norm = qwen3;
  const int64_t batch = args.at("batch"), seq_len = args.at("seq_len"), steps = args.at("steps");
  const DType matmul = args.at("bf16") != 0 ? DType::kBF16 : DType::kF32;
  auto model = DecoderModel::Create(config, {}, ModelCompute{nullptr, matmul}, PipelinePlan{},
                                    qwen3 ? Qwen3Family() : LlamaFamily());
  if (!model.ok()) return Fail(model.status().ToString());
  if (absl::Status init = (*model)->Initialize(0); !init.ok()) return Fail(init.ToString());
  auto registry = PluginRegistry::Discover({TITAN_BUILD_PLUGIN_DIR});
  if (!registry.ok()) return Fail(registry.status().ToString());
  auto raw = ParseRecipeText("[optimizer]\nname = \"adamw\"\nlr = 1e-4\n", "bench.toml");
  if (!raw.ok()) return Fail(raw.status().ToString());
  auto recipe = ValidateRecipe(*raw, **registry);
  if (!recipe.ok()) return Fail(recipe.status().ToString());
  auto optimizer = (*registry)->Create<OptimizerPlugin>("adamw");
  if (!optimizer.ok()) return Fail(optimizer.status().ToString());
  if (auto s = (*optimizer)->Configure(recipe->section("optimizer")); !s.ok())
    return Fail(s.ToString());
  auto step = TrainStep::Create(**model, **optimizer, batch, seq_len, 1, /*max_norm=*/1.0);
  if (!step.ok()) return Fail(step.status().ToString());
  int64_t counter = 0;
  auto next = [&](int32_t* tokens, int32_t* targets) {
    for (int64_t i = 0; i < batch * seq_len; ++i, ++counter) {
      tokens[i] = static_cast<int32_t>((counter * 37 + 11) % config.vocab_size);
      targets[i] = static_cast<int32_t>((counter * 53 + 1) % config.vocab_size);
    }
  };
  std::vector<double> times;
  for (int64_t s = 0; s <= steps; ++s) {  // step 0 warms up: page faults, thread pools
    const auto start = std::chrono::steady_clock::now();
    auto result = step->Run(s + 1, 1e-4, next);
    if (!result.ok()) return Fail(result.status().ToString());
    if (s > 0) times.push_back(Seconds(start));
  }
  if (!profile_dir.empty()) {
    Profiler profiler(1, profile_dir, 0);
    profiler.BeginStep(steps + 2);
    auto result = step->Run(steps + 2, 1e-4, next);
    if (!result.ok()) return Fail(result.status().ToString());
    auto trace = profiler.EndStep(steps + 2);
    if (!trace.ok()) return Fail(trace.status().ToString());
  }
  std::sort(times.begin(), times.end());
  const double median = times[times.size() / 2];
  std::printf(
      "step_s %.4f tokens_per_s %.1f flop_per_token %.6g peak_rss_gib %.4f threads %d "
      "activation_mib %.2f\n",
      median, static_cast<double>(batch * seq_len) / median, FlopPerToken(config, seq_len),
      PeakMemoryGib(), omp_get_max_threads(),
      static_cast<double>((*model)->activation_bytes()) / (1 << 20));
  std::fprintf(stderr, "titan_train_bench: %s, matmuls in %s\n",
               (*model)->compute().Describe().c_str(), DTypeName(matmul));
  return 0;
}

}  // namespace
}  // namespace titan

int main(int argc, char** argv) {
  std::map<std::string, int64_t> args = {
      {"dim", 256},         {"n_layers", 6},  {"n_heads", 16}, {"n_kv_heads", 16},
      {"vocab_size", 2048}, {"seq_len", 256}, {"batch", 8},    {"steps", 5},
      {"bf16", 0},          {"hidden", 0},    {"experts", 0},  {"top_k", 0},
      {"expert_hidden", 0}, {"qwen3", 0}};
  // These may be 0: unset, or a dense model.
  const std::set<std::string> zero_allowed = {"hidden", "experts", "top_k", "expert_hidden",
                                              "qwen3"};
  std::string profile_dir;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--profile_dir") {
      if (i + 1 >= argc) return titan::Fail("--profile_dir: expected a folder");
      profile_dir = argv[++i];
      continue;
    }
    if (flag == "--peak") {
      std::printf("peak_gflops %.2f\n", titan::MeasurePeakTflops(2048) * 1e3);
      return 0;
    }
    if (flag.rfind("--", 0) != 0 || !args.count(flag.substr(2)) || i + 1 >= argc) {
      return titan::Fail("unknown flag or missing value: " + flag);
    }
    const std::string key = flag.substr(2);
    args[key] = std::atoll(argv[++i]);
    if (key == "bf16" ? args[key] != 0 && args[key] != 1
                      : args[key] < (zero_allowed.count(key) ? 0 : 1)) {
      return titan::Fail(flag + (key == "bf16" ? ": expected 0 or 1" : ": expected a count"));
    }
  }
  return titan::Train(args, profile_dir);
}
