#include "tools/gpu_proof/gtest_results.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace titan::gpu_proof {
namespace {

// The first few `names` and how many more: a reason stays one readable line, the report's
// list of cases has them all.
std::string FirstFew(const std::vector<std::string>& names) {
  constexpr size_t kShown = 5;
  if (names.size() <= kShown) return absl::StrJoin(names, ", ");
  return absl::StrCat(absl::StrJoin(names.begin(), names.begin() + kShown, ", "), " and ",
                      names.size() - kShown, " more");
}

}  // namespace

absl::StatusOr<std::vector<TestCase>> ParseGtestJson(const std::string& text,
                                                     const std::string& binary) {
  Json report = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (report.is_discarded() || !report.is_object() || !report.contains("testsuites") ||
      !report["testsuites"].is_array()) {
    return absl::DataLossError(
        absl::StrCat(binary, ": its GoogleTest JSON is not an object with a \"testsuites\" list"));
  }
  std::vector<TestCase> cases;
  try {
    for (const Json& suite : report["testsuites"]) {
      if (!suite.is_object() || !suite.contains("testsuite") || !suite["testsuite"].is_array()) {
        continue;
      }
      for (const Json& test : suite["testsuite"]) {
        if (!test.is_object()) continue;
        TestCase one{binary, absl::StrCat(suite.value("name", "?"), ".", test.value("name", "?")),
                     "pass", "", ""};
        std::vector<std::string> failures;
        for (const Json& failure : test.value("failures", Json::array())) {
          failures.push_back(failure.is_object() ? failure.value("failure", "(no message)")
                                                 : failure.dump());
        }
        if (test.value("result", "") == "SKIPPED" || test.value("status", "") == "NOTRUN") {
          one.status = "skipped";
        } else if (!failures.empty()) {
          one.status = "fail";
        }
        one.failure = absl::StrJoin(failures, "\n");
        cases.push_back(one);
      }
    }
  } catch (const Json::exception& error) {
    return absl::DataLossError(
        absl::StrCat(binary, ": unexpected GoogleTest JSON: ", error.what()));
  }
  return cases;
}

std::map<std::string, std::string> SkipMessages(const std::string& output) {
  std::map<std::string, std::string> messages;
  std::string running, message;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (absl::ConsumePrefix(&line, "[ RUN      ] ")) {
      running = std::string(line);
      message.clear();
    } else if (absl::ConsumePrefix(&line, "[  SKIPPED ] ") && !running.empty() &&
               absl::StartsWith(line, running)) {
      messages[running] = std::string(absl::StripTrailingAsciiWhitespace(message));
      running.clear();
    } else if (!running.empty() && !absl::EndsWith(line, ": Skipped")) {
      absl::StrAppend(&message, line, "\n");
    }
  }
  return messages;
}

GroupJudgement JudgeTestBinaries(const std::vector<BinaryRun>& runs, bool have_device) {
  GroupJudgement judgement;
  std::vector<std::string> problems, failed, blind;
  int ran = 0;
  for (const BinaryRun& run : runs) {
    judgement.timed_out = judgement.timed_out || run.run.timed_out;
    if (!run.run.started) {
      problems.push_back(absl::StrCat(run.binary, ": ", run.run.output));
    } else if (!run.run.ok()) {
      problems.push_back(absl::StrCat(run.binary, ": ", run.run.Describe()));
    } else if (!run.json_error.empty()) {
      problems.push_back(run.json_error);
    }
    for (const TestCase& test : run.cases) {
      if (test.status != "skipped") ++ran;
      if (test.status == "fail") failed.push_back(absl::StrCat(test.binary, " ", test.test));
      if (have_device && test.status == "skipped" &&
          absl::StrContains(test.skip, "no CUDA device")) {
        blind.push_back(absl::StrCat(test.binary, " ", test.test));
      }
    }
  }
  if (!blind.empty()) {
    problems.push_back(absl::StrCat(blind.size(), " skipped for want of a CUDA device though the ",
                                    "driver shows one: ", FirstFew(blind)));
  }
  if (!failed.empty()) {
    problems.push_back(absl::StrCat(failed.size(), " failed: ", FirstFew(failed)));
  }
  if (ran == 0) problems.push_back("no test case ran");
  judgement.pass = problems.empty();
  judgement.reason = absl::StrJoin(problems, "; ");
  return judgement;
}

Json ToJson(const std::vector<BinaryRun>& runs) {
  Json binaries = Json::array(), tests = Json::array();
  for (const BinaryRun& run : runs) {
    Json binary = {
        {"binary", run.binary}, {"outcome", run.run.Describe()}, {"seconds", run.run.seconds}};
    if (!run.run.ok() || !run.json_error.empty()) binary["output"] = Tail(run.run.output);
    binaries.push_back(binary);
    for (const TestCase& test : run.cases) {
      Json entry = {{"binary", test.binary}, {"test", test.test}, {"status", test.status}};
      if (!test.failure.empty()) entry["failure"] = test.failure;
      if (!test.skip.empty()) entry["skip"] = test.skip;
      tests.push_back(entry);
    }
  }
  return {{"binaries", binaries}, {"tests", tests}};
}

}  // namespace titan::gpu_proof
