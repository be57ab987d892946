// The GPU test binaries' results, from the JSON GoogleTest writes (--gtest_output=json:FILE),
// and the judgement over a group of binaries.
#ifndef TITAN_TOOLS_GPU_PROOF_GTEST_RESULTS_H_
#define TITAN_TOOLS_GPU_PROOF_GTEST_RESULTS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/gpu_proof/process.h"
#include "tools/gpu_proof/report.h"

namespace titan::gpu_proof {

struct TestCase {
  std::string binary;
  std::string test;     // Suite.Name
  std::string status;   // "pass", "fail", "skipped"
  std::string failure;  // the failure messages, joined
  std::string skip;     // why it was skipped, from the binary's output
};

// The cases of a GoogleTest JSON report; `binary` names the binary in them and in errors.
absl::StatusOr<std::vector<TestCase>> ParseGtestJson(const std::string& text,
                                                     const std::string& binary);

// The message of each skipped case (Suite.Name -> message) in a binary's output: the JSON of
// this GoogleTest version does not carry it, the text between "[ RUN ]" and "[ SKIPPED ]" does.
std::map<std::string, std::string> SkipMessages(const std::string& output);

struct BinaryRun {
  std::string binary;
  RunResult run;
  std::string json_error;  // empty when its JSON was written and read
  std::vector<TestCase> cases;
};

struct GroupJudgement {
  bool pass = false;
  bool timed_out = false;
  std::string reason;
};

// Passes when every binary exited 0 and wrote its JSON, at least one case ran, and none
// failed. With `have_device` (the driver shows one), a case skipped for want of a CUDA device
// fails too: the tests did not see the GPU the proof is about. The reason names the binaries
// and cases at fault.
GroupJudgement JudgeTestBinaries(const std::vector<BinaryRun>& runs, bool have_device);

// {binaries: [{binary, outcome, output (tail, when it failed)}], tests: [{binary, test, status,
// failure}]}.
Json ToJson(const std::vector<BinaryRun>& runs);

}  // namespace titan::gpu_proof

#endif  // TITAN_TOOLS_GPU_PROOF_GTEST_RESULTS_H_
