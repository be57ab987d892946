// The kernels and nccl parts: the bundle's GPU test binaries, each writing GoogleTest JSON.
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "tools/gpu_proof/gtest_results.h"
#include "tools/gpu_proof/parts.h"

namespace titan::gpu_proof {
namespace {

namespace fs = std::filesystem;

BinaryRun RunTestBinary(const Context& context, const std::string& name) {
  BinaryRun binary{name, {}, "", {}};
  const std::string path = context.bundle.Test(name);
  const std::string json = absl::StrCat(context.work, "/gtest/", name, ".json");
  std::error_code error;
  fs::create_directories(context.work + "/gtest", error);
  fs::remove(json, error);
  if (!fs::exists(path)) {
    binary.run.output = "missing from the bundle: " + path;
    return binary;
  }
  binary.run = context.Run({path, "--gtest_output=json:" + json}, -1,
                           {{"TITAN_PLUGIN_PATH", context.bundle.PluginDir()}});
  std::ifstream file(json);
  if (!file) {
    binary.json_error = absl::StrCat(name, " wrote no test results (", json, ")");
    return binary;
  }
  std::stringstream text;
  text << file.rdbuf();
  absl::StatusOr<std::vector<TestCase>> cases = ParseGtestJson(text.str(), name);
  if (cases.ok()) {
    binary.cases = *cases;
    const std::map<std::string, std::string> skips = SkipMessages(binary.run.output);
    for (TestCase& test : binary.cases) {
      if (skips.count(test.test)) test.skip = skips.at(test.test);
    }
  } else {
    binary.json_error = std::string(cases.status().message());
  }
  return binary;
}

PartOutcome RunTestBinaries(const Context& context, const std::vector<std::string>& names) {
  std::vector<BinaryRun> runs;
  for (const std::string& name : names) runs.push_back(RunTestBinary(context, name));
  const GroupJudgement judgement = JudgeTestBinaries(runs, !context.device_name.empty());
  const PartStatus status = judgement.pass        ? PartStatus::kPass
                            : judgement.timed_out ? PartStatus::kTimedOut
                                                  : PartStatus::kFail;
  return {status, judgement.reason, ToJson(runs)};
}

}  // namespace

PartOutcome KernelsPart(const Context& context) {
  return RunTestBinaries(context, {"titan_cuda_device_test", "titan_cuda_compute_test",
                                   "titan_cublaslt_library_test", "titan_cudnn_attention_test"});
}

PartOutcome NcclPart(const Context& context) {
  return RunTestBinaries(context, {"titan_comm_nccl_test"});
}

}  // namespace titan::gpu_proof
