#include "tools/gpu_proof/replica_groups.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "tools/gpu_proof/losses.h"
#include "tools/gpu_proof/process.h"
#include "tools/gpu_proof/titan_command.h"

namespace titan::gpu_proof {
namespace {

namespace fs = std::filesystem;

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::string BackgroundScript(const std::vector<std::vector<std::string>>& commands,
                             const std::vector<std::string>& logs,
                             const std::vector<std::string>& exits) {
  std::string script;
  for (size_t i = 0; i < commands.size(); ++i) {
    absl::StrAppend(&script, CommandLine(commands[i]), " >", CommandLine({logs[i]}), " 2>&1 & pid",
                    i, "=$!\n");
  }
  for (size_t i = 0; i < commands.size(); ++i) {
    absl::StrAppend(&script, "wait $pid", i, "; echo $? >", CommandLine({exits[i]}), "\n");
  }
  return script;
}

PartOutcome ReplicaGroupsPart(const Context& context) {
  Findings findings;
  const std::string store = context.work + "/replica_groups_store";
  std::error_code ignored;
  fs::remove_all(store, ignored);
  std::vector<std::vector<std::string>> commands;
  std::vector<std::string> folders, logs, exits;
  for (int g = 0; g < 2; ++g) {
    const std::string folder = absl::StrCat(context.work, "/replica_group_", g);
    fs::remove_all(folder, ignored);
    folders.push_back(folder);
    logs.push_back(folder + ".log");
    exits.push_back(folder + ".exit");
    fs::remove(exits.back(), ignored);
    commands.push_back(DebugRecipeCommand(
        context.bundle, folder,
        {"--job.device=cuda", absl::StrCat("--training.steps=", kReplicaGroupSteps),
         "--training.local_batch_size=2", "--fault_tolerance.enable=true",
         absl::StrCat("--fault_tolerance.replica_id=", g), "--fault_tolerance.group_size=2",
         absl::StrCat("--fault_tolerance.store_folder=", store),
         "--fault_tolerance.heartbeat_timeout_ms=5000",
         "--fault_tolerance.process_group_timeout_ms=20000"}));
  }
  const RunResult run = context.Run(
      {"/bin/sh", "-c", BackgroundScript(commands, logs, exits)}, -1,
      {{"TITAN_TEST_FT_KILL", absl::StrCat("1:", kReplicaGroupKilledAt, ":after_join")}});
  const std::string survivor_log = ReadText(logs[0]);
  findings.details["group_0_log"] = Tail(survivor_log);
  findings.details["group_1_log"] = Tail(ReadText(logs[1]));
  if (run.timed_out) {
    findings.timed_out = true;
    findings.Problem("timed out while the two groups trained");
    return findings.Outcome();
  }
  const std::string exit0 = std::string(absl::StripAsciiWhitespace(ReadText(exits[0])));
  const std::string exit1 = std::string(absl::StripAsciiWhitespace(ReadText(exits[1])));
  if (exit1 != "137") {
    findings.Problem(absl::StrCat("group 1 should have died of SIGKILL (status 137) in step ",
                                  kReplicaGroupKilledAt, ", ended with status \"", exit1, "\""));
  }
  if (exit0 != "0") {
    findings.Problem(
        absl::StrCat("group 0 should have gone on alone, ended with status \"", exit0, "\""));
    return findings.Outcome();
  }
  absl::StatusOr<Metrics> survivor = ReadMetrics(folders[0] + "/metrics.jsonl");
  absl::StatusOr<Metrics> killed = ReadMetrics(folders[1] + "/metrics.jsonl");
  if (!survivor.ok() || !killed.ok()) {
    findings.Problem(std::string((survivor.ok() ? killed : survivor).status().message()));
    return findings.Outcome();
  }
  if (static_cast<int>(survivor->training.size()) != kReplicaGroupSteps) {
    findings.Problem(absl::StrCat("group 0 logged ", survivor->training.size(), " steps of ",
                                  kReplicaGroupSteps));
  }
  for (const char* said : {"did not commit; redoing it", "the quorum is now group(s) [0]"}) {
    if (survivor_log.find(said) == std::string::npos) {
      findings.Problem(absl::StrCat("group 0 never logged \"", said, "\""));
    }
  }
  // While both lived, each logged the loss averaged over the two.
  for (int64_t step = 1; step < kReplicaGroupKilledAt; ++step) {
    if (!survivor->training.count(step) || !killed->training.count(step) ||
        survivor->Loss(step) != killed->Loss(step)) {
      findings.Problem(absl::StrCat("the groups' losses differ (or are missing) at step ", step,
                                    ", when both lived"));
    }
  }
  return findings.Outcome();
}

}  // namespace titan::gpu_proof
