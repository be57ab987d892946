#include "tools/gpu_proof/parts.h"

#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "tools/gpu_proof/budget.h"
#include "tools/gpu_proof/cpu_info.h"
#include "tools/gpu_proof/titan_output.h"

namespace titan::gpu_proof {
namespace {

namespace fs = std::filesystem;

// Compares `run`'s losses with `want`'s; a mismatch is a problem, the table goes to details.
void CompareWith(Findings& findings, const std::string& key, const TitanRun& run,
                 const Metrics& want, const CompareOptions& options) {
  Comparison comparison = CompareLosses(*run.metrics, want, options);
  findings.details[key] = ToJson(comparison, options.tolerance);
  if (!comparison.pass) findings.Problem(absl::StrCat(run.what, ": ", comparison.reason));
}

// The CPU f32 run against the reference, in the bundle part.
void CheckCpuReference(const Context& context, Findings& findings) {
  TitanRun cpu = RunDebugRecipe(context, "the cpu f32 run", "cpu_f32", F32LossOverrides("cpu"));
  if (!cpu.ok()) return findings.RunWentWrong("cpu_f32", cpu);
  absl::StatusOr<Metrics> reference = ReadMetrics(context.bundle.ReferenceMetrics());
  if (!reference.ok()) return findings.Problem(std::string(reference.status().message()));
  CompareWith(findings, "losses_cpu_vs_reference", cpu, *reference, {.tolerance = kLossTolerance});
}

}  // namespace

PartOutcome BundlePart(const Context& context) {
  Findings findings;
  const std::string titan_run = context.bundle.TitanRun();
  TitanRun version{"titan-run --version", "", context.Run({titan_run, "--version"})};
  if (version.run.ok()) {
    findings.details["version"] = absl::StripAsciiWhitespace(version.run.output);
  } else {
    findings.RunWentWrong("version", version);
  }
  TitanRun listing{"titan-run --list-plugins", "", context.Run({titan_run, "--list-plugins"})};
  if (listing.run.ok()) {
    const std::vector<std::string> plugins = BundlePluginPaths(context.bundle.PluginDir());
    findings.details["plugins"] = plugins;
    std::vector<std::string> problems = PluginListingProblems(listing.run.output, plugins);
    if (plugins.empty()) problems.push_back("no titan_*.so in " + context.bundle.PluginDir());
    for (const std::string& problem : problems) findings.Problem("--list-plugins: " + problem);
    if (!problems.empty()) findings.details["list_plugins_output"] = Tail(listing.run.output, 80);
  } else {
    findings.RunWentWrong("list_plugins", listing);
  }
  CheckCpuReference(context, findings);
  return findings.Outcome();
}

PartOutcome LossesPart(const Context& context) {
  Findings findings;
  absl::StatusOr<Metrics> reference = ReadMetrics(context.bundle.ReferenceMetrics());
  if (!reference.ok()) {
    findings.Problem(std::string(reference.status().message()));
    return findings.Outcome();
  }
  TitanRun cuda = RunDebugRecipe(context, "the cuda f32 run", "cuda_f32", F32LossOverrides("cuda"));
  if (!cuda.ok()) {
    findings.RunWentWrong("cuda_f32", cuda);
  } else {
    CompareWith(findings, "losses", cuda, *reference, {.tolerance = kLossTolerance});
  }
  return findings.Outcome();
}

PartOutcome ResumePart(const Context& context) {
  Findings findings;
  TitanRun straight = RunDebugRecipe(context, "the uninterrupted 20-step cuda run",
                                     "resume_straight", ResumeOverrides("cuda"));
  if (!straight.ok()) {
    findings.RunWentWrong("straight", straight);
    return findings.Outcome();
  }
  // A fresh dump folder holding only the step-10 checkpoint.
  const fs::path source = fs::path(straight.folder) / "checkpoint" / "step-10";
  const fs::path resumed_folder = fs::path(context.work) / "resume_resumed";
  std::error_code error;
  fs::remove_all(resumed_folder, error);
  fs::create_directories(resumed_folder / "checkpoint", error);
  if (!error)
    fs::copy(source, resumed_folder / "checkpoint" / "step-10", fs::copy_options::recursive, error);
  if (error) {
    findings.Problem(absl::StrCat("cannot copy ", source.string(), ": ", error.message()));
    return findings.Outcome();
  }
  TitanRun resumed = RunDebugRecipe(context, "the cuda run resumed from step 10", "resume_resumed",
                                    ResumeOverrides("cuda"), 1, -1, /*fresh=*/false);
  if (!resumed.ok()) {
    findings.RunWentWrong("resumed", resumed);
    return findings.Outcome();
  }
  if (!SaysLoadedStep(resumed.run.output, 10)) {
    findings.Problem("the resumed run did not say it loaded step-10 (step 10)");
    findings.details["resumed_output"] = Tail(resumed.run.output);
  }
  CompareWith(findings, "losses_after_step_10", resumed, *straight.metrics,
              {.tolerance = 0, .after_step = 10, .with_eval = true});
  absl::StatusOr<bool> same =
      SameBytes(straight.folder + "/model.arena", resumed.folder + "/model.arena");
  findings.details["final_parameters_identical"] = same.ok() && *same;
  if (!same.ok()) findings.Problem(std::string(same.status().message()));
  if (same.ok() && !*same) findings.Problem("the final parameters (model.arena) differ");
  return findings.Outcome();
}

PartOutcome LayoutsPart(const Context& context) {
  if (!fs::exists(context.bundle.Launcher())) {
    return {PartStatus::kNotRun, kNoLauncher, {{"launcher", context.bundle.Launcher()}}};
  }
  Findings findings;
  const std::vector<std::string> common = {"--training.steps=10", "--job.device=cuda",
                                           "--training.global_batch_size=4"};
  auto with = [&common](std::vector<std::string> extra) {
    extra.insert(extra.begin(), common.begin(), common.end());
    return extra;
  };
  // Two ranks against one: the same global batch of 4, split or not.
  struct Layout {
    std::string name;
    std::vector<std::string> single, pair;
  };
  const std::vector<std::string> float8 = {"--model.converters=float8",
                                           "--float8.recipe_name=tensorwise",
                                           "--training.local_batch_size=2"};
  std::vector<Layout> layouts = {
      {"fsdp2", with({"--training.local_batch_size=4"}),
       with({"--training.local_batch_size=2", "--parallelism.data_parallel_shard_degree=2",
             "--comm.backend=mpi"})},
      {"tp2", with({"--training.local_batch_size=4"}),
       with({"--training.local_batch_size=4", "--parallelism.data_parallel_shard_degree=1",
             "--parallelism.tensor_parallel_degree=2", "--comm.backend=mpi"})},
      // fsdp's Float8 all-gather: the e4m3 codes gathered between two ranks, against one rank
      // accumulating the same microbatches.
      {"fsdp2_float8_all_gather", with(float8),
       with({"--model.converters=float8", "--float8.recipe_name=tensorwise",
             "--training.local_batch_size=2", "--parallelism.data_parallel_shard_degree=2",
             "--float8.enable_fsdp_float8_all_gather=true",
             "--float8.precompute_float8_dynamic_scale_for_fsdp=true", "--comm.backend=mpi"})}};
  std::map<std::vector<std::string>, TitanRun> singles;  // fsdp2 and tp2 share theirs
  for (const Layout& layout : layouts) {
    if (!singles.count(layout.single)) {
      singles[layout.single] = RunDebugRecipe(context, "the single-rank run for " + layout.name,
                                              "layout_single_" + layout.name, layout.single);
    }
    const TitanRun& single = singles[layout.single];
    if (!single.ok()) {
      findings.RunWentWrong(layout.name + "_single", single);
      continue;
    }
    TitanRun pair = RunDebugRecipe(context, "the " + layout.name + " run", "layout_" + layout.name,
                                   layout.pair, /*ranks=*/2);
    if (!pair.ok()) {
      findings.RunWentWrong(layout.name, pair);
      continue;
    }
    CompareWith(findings, layout.name, pair, *single.metrics, {.tolerance = kLossTolerance});
  }
  return findings.Outcome();
}

absl::Status MakeReference(const Context& context) {
  const RunResult version = context.Run({context.bundle.TitanRun(), "--version"});
  TitanRun cpu = RunDebugRecipe(context, "the cpu f32 run", "cpu_f32", F32LossOverrides("cpu"));
  if (!cpu.ok()) {
    Findings findings;
    findings.RunWentWrong("cpu_f32", cpu);
    return absl::InternalError(absl::StrCat(findings.problems[0], "\n", Tail(cpu.run.output)));
  }
  const fs::path folder = fs::path(context.bundle.ReferenceDir()) / "cpu_f32";
  std::error_code error;
  fs::create_directories(folder, error);
  fs::copy_file(cpu.folder + "/metrics.jsonl", folder / "metrics.jsonl",
                fs::copy_options::overwrite_existing, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot write ", (folder / "metrics.jsonl").string(), ": ", error.message()));
  }
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::stringstream cpuinfo_text;
  cpuinfo_text << cpuinfo.rdbuf();
  Json reference = {
      {"command",
       CommandLine(DebugRecipeCommand(context.bundle, cpu.folder, F32LossOverrides("cpu")))},
      {"titan", version.ok() ? std::string(absl::StripAsciiWhitespace(version.output)) : ""},
      {"cpu", CpuModel(cpuinfo_text.str())},
      {"date", date},
      {"steps", cpu.metrics->training.size()},
      {"metrics", "cpu_f32/metrics.jsonl"}};
  return WriteJsonAtomically(context.bundle.ReferenceDir() + "/reference.json", reference);
}

PartOutcome AsyncTpPart(const Context& context) {
  if (context.device_count < 2) {
    std::cout << "gpu-check: async_tp: skipped: " << context.device_count
              << " CUDA device; async tensor parallelism's figure needs two or more\n";
    return {PartStatus::kNotRun, kOneDevice, {{"devices", context.device_count}}};
  }
  if (!fs::exists(context.bundle.Launcher())) {
    return {PartStatus::kNotRun, kNoLauncher, {{"launcher", context.bundle.Launcher()}}};
  }
  Findings findings;
  Json rows = Json::array();
  std::optional<Metrics> synchronous;
  for (bool async : {false, true}) {
    const std::string mode = async ? "async" : "synchronous";
    TitanRun run = RunDebugRecipe(
        context, absl::StrCat("the tp 2 ", mode, " run"), absl::StrCat("async_tp_", mode),
        {"--training.steps=10", "--job.device=cuda", "--comm.backend=nccl",
         "--training.mixed_precision_param=bfloat16", "--training.seq_len=2048",
         "--training.local_batch_size=4", "--parallelism.data_parallel_shard_degree=1",
         "--parallelism.tensor_parallel_degree=2", "--metrics.log_freq=1",
         "--profiling.enable_profiling=true", "--profiling.profile_freq=1000",
         absl::StrCat("--parallelism.enable_async_tensor_parallel=", async ? "true" : "false")},
        /*ranks=*/2, ShareS(context.LeftS(), 1, async ? 1 : 2));
    if (!run.ok()) {
      findings.RunWentWrong(absl::StrCat("async_tp_", mode), run);
      continue;
    }
    const Json last =
        run.metrics->training.empty() ? Json::object() : run.metrics->training.rbegin()->second;
    rows.push_back({{"mode", mode},
                    {"tokens_per_s", last.value("tps", 0.0)},
                    {"tp_comm_hidden_s", last.value("tp_comm_hidden_s", 0.0)},
                    {"tp_comm_exposed_s", last.value("tp_comm_exposed_s", 0.0)}});
    std::cout << "gpu-check: async_tp: " << mode << ": " << last.dump() << "\n";
    if (!async) synchronous = *run.metrics;
    if (async && synchronous) {
      CompareWith(findings, "losses_async_vs_synchronous", run, *synchronous,
                  {.tolerance = kBf16LayoutTolerance});
    }
  }
  findings.details["runs"] = rows;
  return findings.Outcome();
}

}  // namespace titan::gpu_proof
