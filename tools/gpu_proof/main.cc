// titan-gpu-proof: the GPU proof of a titan bundle, run on a lent GPU machine through
// tools/gpu-check --bundle DIR. Usage in flags.h; the parts in parts.h.
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "tools/gpu_proof/budget.h"
#include "tools/gpu_proof/cuda_probe.h"
#include "tools/gpu_proof/flags.h"
#include "tools/gpu_proof/libraries.h"
#include "tools/gpu_proof/parts.h"
#include "tools/gpu_proof/replica_groups.h"
#include "tools/gpu_proof/summary.h"

namespace titan::gpu_proof {
namespace {

namespace fs = std::filesystem;

std::string TimeOfDay(std::time_t when, const char* format) {
  char text[32];
  std::strftime(text, sizeof text, format, std::localtime(&when));
  return text;
}

Json ReadManifest(const std::string& path) {
  std::ifstream file(path);
  if (!file) return {{"error", "no manifest.json in the bundle"}};
  std::stringstream text;
  text << file.rdbuf();
  Json manifest = Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (manifest.is_discarded()) return {{"error", "manifest.json is not JSON"}};
  return manifest;
}

// A fresh folder under $TMPDIR (or /tmp) for the runs; empty on failure.
std::string MakeWorkFolder() {
  const char* tmpdir = std::getenv("TMPDIR");
  std::string pattern =
      absl::StrCat(tmpdir && *tmpdir ? tmpdir : "/tmp", "/titan-gpu-proof-XXXXXX");
  return mkdtemp(pattern.data()) ? pattern : "";
}

// The children's environment: the CUDA libraries' folders first in LD_LIBRARY_PATH, and
// OpenMP threads for the CPU run. Records what was found in the report and the log.
std::vector<std::pair<std::string, std::string>> EnvironmentForChildren(Json& report,
                                                                        const std::string& log) {
  const SearchRoots roots = DefaultSearchRoots();
  const LibrarySearch search = FindLibraries(kCudaLibraries, CandidateFolders(roots));
  std::ofstream out(log, std::ios::app);
  Json libraries = Json::object();
  for (const FoundLibrary& library : search.libraries) {
    libraries[library.name] = library.path.empty() ? "not found" : library.path;
    const std::string line = absl::StrCat("library ", library.name, ": ",
                                          libraries[library.name].get<std::string>(), "\n");
    out << line;
    std::cout << "gpu-check: " << line;
  }
  report["libraries"] = libraries;
  report["library_folders_prepended"] = search.folders;
  return {{"LD_LIBRARY_PATH", PrependToPath(search.folders, roots.ld_library_path)},
          {"OMP_NUM_THREADS", "4"}};
}

struct PartToRun {
  PartBudget budget;
  std::function<PartOutcome(const Context&)> run;
};

PartResult RunPart(const PartToRun& part, Context& context, double limit_s, double left_s,
                   int index, int count) {
  PartResult result{part.budget.name, PartStatus::kNotRun, "", 0, part.budget.budget_s};
  const std::time_t now = std::time(nullptr);
  std::cout << absl::StrFormat(
                   "gpu-check: [%d/%d] %s: budget %.0f s, done by %s at the latest (%.0f s left "
                   "before the deadline)\n",
                   index, count, part.budget.name, part.budget.budget_s,
                   TimeOfDay(now + static_cast<std::time_t>(limit_s), "%H:%M:%S"), left_s)
            << std::flush;
  const Clock::time_point start = Clock::now();
  context.part_end = start + std::chrono::milliseconds(static_cast<int64_t>(limit_s * 1000));
  PartOutcome outcome;
  try {
    outcome = part.run(context);
  } catch (const std::exception& error) {  // one broken part must not lose the others' results
    outcome = {PartStatus::kFail, absl::StrCat("internal error: ", error.what()), Json::object()};
  }
  result.status = outcome.status;
  result.reason = outcome.reason;
  result.details = outcome.details;
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::cout << absl::StrFormat("gpu-check: %s: %s (%.1f s)%s\n", result.name,
                               StatusName(result.status), result.seconds,
                               result.reason.empty() ? "" : ": " + result.reason)
            << std::flush;
  return result;
}

// Probes the device into the report; false when there is none.
bool ProbeDevice(Json& report) {
  const CudaProbe probe = ProbeCuda();
  Json devices = Json::array();
  for (const CudaDevice& device : probe.devices) {
    devices.push_back({{"name", device.name}, {"compute_capability", device.compute_capability}});
  }
  report["devices"] = devices;
  report["driver"] = probe.driver.empty() ? Json() : Json(probe.driver);
  report["cuda_probe"] = probe.note;
  if (probe.devices.empty()) {
    std::cout << "gpu-check: no CUDA device (" << probe.note << "): the GPU parts are not run\n";
    return false;
  }
  const CudaDevice& device = probe.devices[0];
  report["device"] =
      absl::StrCat(device.name, " (compute capability ", device.compute_capability, ")");
  std::cout << "gpu-check: " << report["device"].get<std::string>() << ", driver " << probe.driver
            << "\n";
  return true;
}

int RunProof(const Flags& flags, Context& context, Json& report, Clock::time_point start) {
  const std::vector<PartBudget> budgets = PartBudgets(flags.deadline_s);
  const std::vector<std::function<PartOutcome(const Context&)>> parts = {
      BundlePart,  KernelsPart,       NcclPart,       LossesPart, ResumePart,
      LayoutsPart, ReplicaGroupsPart, ThroughputPart, AsyncTpPart};
  std::vector<PartResult> results;
  for (const PartBudget& budget : budgets) {
    results.push_back({budget.name, PartStatus::kNotRun, kPending, 0, budget.budget_s});
  }
  auto elapsed_s = [start] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  auto write = [&] {
    Json entries = Json::object();
    for (const PartResult& result : results) entries[result.name] = ToJson(result);
    report["parts"] = entries;
    report["seconds"] = std::round(elapsed_s() * 10) / 10;
    absl::Status written = WriteJsonAtomically(report["report"].get<std::string>(), report);
    if (!written.ok()) std::cerr << "titan-gpu-proof: " << written.message() << "\n";
    return written.ok();
  };
  write();
  bool have_device = true;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i == 1) {
      have_device = ProbeDevice(report);
      context.device_name = have_device ? report["devices"][0]["name"].get<std::string>() : "";
      context.device_count = static_cast<int>(report["devices"].size());
    }
    if (i >= 1 && !have_device) {
      results[i].reason = kNoDevice;
      continue;
    }
    const double left_s = flags.deadline_s - elapsed_s();
    const double limit_s = PartLimitS(budgets[i].budget_s, elapsed_s(), flags.deadline_s);
    if (limit_s <= 0) {
      results[i].reason = kOverallDeadline;
      std::cout << "gpu-check: " << budgets[i].name << ": not run: overall deadline\n";
    } else {
      results[i] = RunPart({budgets[i], parts[i]}, context, limit_s, left_s, i + 1, parts.size());
    }
    write();
  }
  const Verdict verdict = DecideVerdict(have_device, results);
  report["verdict"] = verdict.name;
  report["exit_code"] = verdict.exit_code;
  report["verdict_notes"] = verdict.notes;
  report["finished"] = TimeOfDay(std::time(nullptr), "%Y-%m-%dT%H:%M:%S%z");
  const bool written = write();
  std::cout << FormatSummary(report);
  if (verdict.name == "no device") std::cout << kNoDeviceLine << "\n";
  if (!written) {
    std::cerr << "titan-gpu-proof: the report could not be written; the proof fails\n";
    return kExitFail;
  }
  return verdict.exit_code;
}

int Main(const std::vector<std::string>& args) {
  absl::StatusOr<Flags> flags = ParseFlags(args);
  if (!flags.ok()) {
    std::cerr << "titan-gpu-proof: " << flags.status().message() << "\n" << kUsage;
    return kExitUsage;
  }
  if (flags->help) {
    std::cout << kUsage;
    return kExitPass;
  }
  const std::string bundle_dir = fs::absolute(flags->bundle).lexically_normal().string();
  const std::vector<std::string> missing = MissingFromBundle(bundle_dir, flags->make_reference);
  if (!missing.empty()) {
    std::cerr << "titan-gpu-proof: the bundle " << bundle_dir << " lacks "
              << absl::StrJoin(missing, ", ")
              << (missing.back() == "reference/cpu_f32/metrics.jsonl"
                      ? " (tools/gpu-bundle makes the reference with --make-reference)\n"
                      : "\n");
    return kExitUsage;
  }
  const std::string report_path = fs::absolute(flags->report).lexically_normal().string();
  std::error_code error;
  fs::create_directories(fs::path(report_path).parent_path(), error);
  if (!fs::is_directory(fs::path(report_path).parent_path(), error)) {
    std::cerr << "titan-gpu-proof: cannot make the folder of the report " << report_path << "\n";
    return kExitUsage;
  }
  std::string work = flags->work.empty() ? MakeWorkFolder() : fs::absolute(flags->work).string();
  if (work.empty() || (fs::create_directories(work, error), !fs::is_directory(work, error))) {
    std::cerr << "titan-gpu-proof: cannot make the work folder " << work << "\n";
    return kExitUsage;
  }
  KillChildrenOnTermination();
  // A closed stdout (a reader that went away) must not end the proof with its runs half done.
  signal(SIGPIPE, SIG_IGN);
  const Clock::time_point start = Clock::now();
  Json report = {{"tool", "titan-gpu-proof"},
                 {"started", TimeOfDay(std::time(nullptr), "%Y-%m-%dT%H:%M:%S%z")},
                 {"report", report_path},
                 {"log", LogPathFor(report_path)},
                 {"work", work},
                 {"bundle", ReadManifest(Bundle{bundle_dir}.Manifest())},
                 {"bundle_dir", bundle_dir},
                 {"deadline_s", flags->deadline_s},
                 {"device", nullptr},
                 {"devices", Json::array()},
                 {"driver", nullptr},
                 {"cuda_probe", "not yet"},
                 {"libraries", Json::object()},
                 {"library_folders_prepended", Json::array()},
                 {"verdict", "running"},
                 {"exit_code", nullptr},
                 {"verdict_notes", Json::array()},
                 {"seconds", 0},
                 {"finished", nullptr},
                 {"parts", Json::object()}};
  Context context{Bundle{bundle_dir}, work, LogPathFor(report_path), {}, ""};
  context.env = EnvironmentForChildren(report, context.log);
  std::cout << "gpu-check: log in " << context.log << ", runs in " << work << "\n";
  if (flags->make_reference) {
    context.part_end = start + std::chrono::seconds(static_cast<int64_t>(flags->deadline_s));
    absl::Status made = MakeReference(context);
    std::cout << "gpu-check: "
              << (made.ok() ? "reference written to " + context.bundle.ReferenceDir()
                            : std::string(made.message()))
              << "\n";
    return made.ok() ? kExitPass : kExitFail;
  }
  return RunProof(*flags, context, report, start);
}

}  // namespace
}  // namespace titan::gpu_proof

int main(int argc, char** argv) {
  return titan::gpu_proof::Main(std::vector<std::string>(argv + 1, argv + argc));
}
