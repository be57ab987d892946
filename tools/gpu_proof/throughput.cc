#include "tools/gpu_proof/throughput.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <regex>
#include <thread>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/gpu_proof/budget.h"
#include "tools/gpu_proof/kernel_profile.h"
#include "tools/gpu_proof/parts.h"

namespace titan::gpu_proof {
namespace {

// Dense bf16 peaks by a part of the device's name, the first match winning.
const std::vector<std::pair<std::string, double>> kPeaks = {
    {"H200", 989.0}, {"H100", 989.0}, {"A100", 312.0}};

// A number of the table with `decimals` decimals, "n/a" when absent.
std::string Figure(const Json& row, const char* key, int decimals) {
  if (!row.is_object() || !row.contains(key) || !row[key].is_number()) return "n/a";
  return absl::StrFormat("%.*f", decimals, row[key].get<double>());
}

// Every core, for the single-rank runs: their start-up (data, tokenizer) runs on the host.
std::string AllCores() { return std::to_string(std::max(1u, std::thread::hardware_concurrency())); }

}  // namespace

std::optional<double> PeakTflops(const std::string& device_name) {
  for (const auto& [key, peak] : kPeaks) {
    if (device_name.find(key) != std::string::npos) return peak;
  }
  return std::nullopt;
}

std::optional<double> MeasuredCeiling(const std::string& output) {
  static const std::regex line(R"(\[metrics\] peak ([0-9.]+) TFLOP/s per rank, for MFU: measured)");
  std::smatch match;
  double tflops = 0;
  if (!std::regex_search(output, match, line) || !absl::SimpleAtod(match[1].str(), &tflops) ||
      tflops <= 0) {
    return std::nullopt;
  }
  return tflops;
}

std::vector<ThroughputRun> ThroughputRuns(const Bundle& bundle) {
  const std::vector<std::string> debugmodel = {"--training.steps=20", "--metrics.log_freq=10"};
  // A flavor of Llama 3's 128k vocabulary at seq_len 2048, a few steps, no recomputation.
  auto large = [&bundle](const char* flavor, int64_t batch, int64_t steps) {
    return std::vector<std::string>{absl::StrCat("--model.flavor=", flavor),
                                    absl::StrCat("--model.tokenizer_path=", bundle.Tokenizer128k()),
                                    "--training.seq_len=2048",
                                    absl::StrCat("--training.local_batch_size=", batch),
                                    "--activation_checkpoint.mode=none",
                                    absl::StrCat("--training.steps=", steps),
                                    absl::StrCat("--metrics.log_freq=", steps / 2),
                                    "--lr_scheduler.warmup_steps=2"};
  };
  std::vector<std::string> eight_b = large("8B", 2, 6);
  // 8B's width at 8 of its 32 layers: 2.8B parameters, with AdamW's state in f32 45 GB.
  eight_b.push_back("--model.n_layers=8");
  struct Shape {
    const char* flavor;
    const char* folder;
    std::vector<std::string> overrides;
    double weight;
    std::vector<const char*> float8_recipes;
  };
  const std::vector<Shape> shapes = {
      {"debugmodel", "debugmodel", debugmodel, 1.0, {"tensorwise"}},
      {"1B", "1B", large("1B", 4, 8), 2.0, {"tensorwise", "rowwise"}},
      {"8B, 8 layers", "8B_8_layers", eight_b, 3.0, {"tensorwise", "rowwise"}}};
  std::vector<ThroughputRun> runs;
  for (const Shape& shape : shapes) {
    std::vector<const char*> recipes = {""};  // bf16 alone first
    recipes.insert(recipes.end(), shape.float8_recipes.begin(), shape.float8_recipes.end());
    for (const char* recipe : recipes) {
      const bool float8 = *recipe != '\0';
      ThroughputRun run{shape.flavor,
                        float8 ? absl::StrCat("float8 ", recipe) : "bf16",
                        absl::StrCat("throughput_", shape.folder, float8 ? "_float8_" : "", recipe),
                        shape.weight,
                        {"--job.device=cuda", "--training.mixed_precision_param=bfloat16"}};
      run.overrides.insert(run.overrides.end(), shape.overrides.begin(), shape.overrides.end());
      if (float8) {
        for (std::string flag : {std::string("--model.converters=float8"),
                                 absl::StrCat("--float8.recipe_name=", recipe),
                                 std::string("--float8.filter_fqns=[\"output\"]")}) {
          run.overrides.push_back(flag);
        }
      }
      runs.push_back(run);
    }
  }
  return runs;
}

Json ThroughputRow(const ThroughputRun& run, const std::string& status, const Metrics& metrics,
                   std::optional<double> peak, std::optional<double> ceiling) {
  Json last = metrics.training.empty() ? Json::object() : metrics.training.rbegin()->second;
  auto field = [&last](const char* name) { return last.contains(name) ? last[name] : Json(); };
  const Json tflops = field("tflops");
  auto percent_of = [&tflops](std::optional<double> denominator) {
    return tflops.is_number() && denominator ? Json(100.0 * tflops.get<double>() / *denominator)
                                             : Json();
  };
  return {{"flavor", run.flavor},
          {"precision", run.precision},
          {"status", status},
          {"tokens_per_s", field("tps")},
          {"tflops", tflops},
          {"mfu_percent", percent_of(peak)},
          {"ceiling_tflops", ceiling ? Json(*ceiling) : Json()},
          {"mfu_ceiling_percent", percent_of(ceiling)},
          {"mem_gib", field("mem_gib")},
          {"step", field("step")}};
}

std::string FormatThroughputTable(const Json& rows) {
  std::string table =
      absl::StrFormat("%-12s %-17s %-10s %12s %9s %7s %11s %9s\n", "flavor", "precision", "status",
                      "tokens/s", "TFLOP/s", "MFU %", "ceiling %", "mem GiB");
  for (const Json& row : rows) {
    table += absl::StrFormat("%-12s %-17s %-10s %12s %9s %7s %11s %9s\n", row.value("flavor", "?"),
                             row.value("precision", "?"), row.value("status", "?"),
                             Figure(row, "tokens_per_s", 0), Figure(row, "tflops", 1),
                             Figure(row, "mfu_percent", 1), Figure(row, "mfu_ceiling_percent", 1),
                             Figure(row, "mem_gib", 1));
  }
  return table;
}

ThroughputRun ProfiledRun(const ThroughputRun& run) {
  ThroughputRun profiled = run;
  profiled.folder += "_profiled";
  for (std::string& override : profiled.overrides) {
    if (absl::StartsWith(override, "--training.steps=")) override = "--training.steps=3";
  }
  profiled.overrides.push_back("--profiling.enable_profiling=true");
  profiled.overrides.push_back("--profiling.profile_freq=3");
  return profiled;
}

void ProfileKernels(const Context& context, const std::vector<ThroughputRun>& runs,
                    const std::string& threads, Findings& findings) {
  const auto one_b = std::find_if(runs.begin(), runs.end(), [](const ThroughputRun& run) {
    return run.flavor == "1B" && run.precision == "bf16";
  });
  if (one_b == runs.end()) return;
  const ThroughputRun run = ProfiledRun(*one_b);
  TitanRun done = RunDebugRecipe(context, "the profiled 1B bf16 run", run.folder, run.overrides, 1,
                                 context.LeftS(), /*fresh=*/true, {{"OMP_NUM_THREADS", threads}});
  if (!done.ok()) {
    findings.RunWentWrong(run.folder, done);
    return;
  }
  const std::string trace = done.folder + "/profile_trace/iteration_3/rank0_trace.json";
  std::ifstream in(trace);
  absl::StatusOr<Json> profile = KernelProfile(std::string(std::istreambuf_iterator<char>(in), {}));
  if (!profile.ok()) {
    findings.Problem(absl::StrCat(trace, ": ", profile.status().message()));
    return;
  }
  findings.details["kernel_profile"] = *profile;
}

PartOutcome ThroughputPart(const Context& context) {
  const std::optional<double> peak = PeakTflops(context.device_name);
  Findings findings;
  findings.details["peak_tflops"] = peak ? Json(*peak) : Json();
  findings.details["peak_source"] =
      peak ? absl::StrCat("dense bf16 peak of ", context.device_name)
           : absl::StrCat("unknown for ", context.device_name, ": MFU not reported");
  const std::vector<ThroughputRun> runs = ThroughputRuns(context.bundle);
  const std::string threads = AllCores();
  findings.details["omp_num_threads"] = threads;
  double weights_left = 0;
  for (const ThroughputRun& run : runs) weights_left += run.weight;
  Json rows = Json::array();
  for (const ThroughputRun& run : runs) {
    const double limit_s = ShareS(context.LeftS(), run.weight, weights_left);
    weights_left -= run.weight;
    TitanRun done = RunDebugRecipe(
        context, absl::StrCat("the ", run.flavor, " ", run.precision, " run"), run.folder,
        run.overrides, 1, limit_s, /*fresh=*/true, {{"OMP_NUM_THREADS", threads}});
    std::string status = "pass";
    if (!done.ok()) {
      status = done.run.timed_out ? "timed out" : "fail";
      findings.RunWentWrong(run.folder, done);
    } else if (done.metrics->training.empty()) {
      status = "fail";
      findings.Problem(done.what + " logged no training step");
    }
    rows.push_back(ThroughputRow(run, status, done.ok() ? *done.metrics : Metrics(), peak,
                                 MeasuredCeiling(done.run.output)));
  }
  findings.details["rows"] = rows;
  ProfileKernels(context, runs, threads, findings);
  return findings.Outcome();
}

}  // namespace titan::gpu_proof
