// Schedules as CSV files: one line per rank, one action per cell, as PyTorch writes them.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "plugins/parallel/pp/schedule.h"

namespace titan::pp {
namespace {

struct Placement {
  int rank;
  int line;
};

}  // namespace

absl::StatusOr<Schedule> ReadCsv(const std::string& path, int ranks, int microbatches) {
  if (ranks < 1 || microbatches < 1) {
    return absl::InvalidArgumentError(absl::StrCat("pipeline schedule CSV '", path,
                                                   "': expected at least 1 rank and microbatch, "
                                                   "found ",
                                                   ranks, " and ", microbatches));
  }
  std::error_code error;
  if (std::filesystem::exists(path, error) && !std::filesystem::is_regular_file(path, error)) {
    // A folder reads as no lines, which would be reported as "found 0" rank lines.
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline schedule CSV '", path, "': not a file (a folder?)"));
  }
  std::ifstream file(path);
  if (!file) {
    return absl::NotFoundError(
        absl::StrCat("pipeline schedule CSV '", path, "': cannot open: ", std::strerror(errno)));
  }
  Schedule schedule;
  schedule.name = path;
  schedule.ranks = ranks;
  schedule.microbatches = microbatches;
  std::map<int, Placement> placed;  // stage -> where its first compute action appears
  bool communicates = false;
  std::string text;
  for (int line = 1; std::getline(file, text); ++line) {
    const absl::string_view content = absl::StripAsciiWhitespace(text);
    if (content.empty() || absl::StartsWith(content, "#")) continue;
    const int rank = static_cast<int>(schedule.actions.size());
    if (rank == ranks) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ":", line, ": expected ", ranks, " rank lines (the pipeline degree), found more"));
    }
    std::vector<Action>& actions = schedule.actions.emplace_back();
    int cell = 0;
    for (absl::string_view raw : absl::StrSplit(content, ',')) {
      ++cell;
      const absl::string_view value = absl::StripAsciiWhitespace(raw);
      if (value.empty()) continue;
      auto where = [&] {
        return absl::StrCat(path, ":", line, ": cell ", cell, " ('", Excerpt(value), "')");
      };
      absl::StatusOr<Action> action = ParseAction(value);
      if (!action.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(where(), ": ", action.status().message()));
      }
      if (action->microbatch >= microbatches) {
        return absl::InvalidArgumentError(absl::StrCat(where(), ": microbatch ", action->microbatch,
                                                       " out of range: expected 0 to ",
                                                       microbatches - 1));
      }
      if (IsCompute(action->type)) {
        auto [it, first] = placed.try_emplace(action->stage, Placement{rank, line});
        if (!first && it->second.rank != rank) {
          return absl::InvalidArgumentError(absl::StrCat(
              where(), ": stage ", action->stage, " already runs on rank ", it->second.rank,
              " (line ", it->second.line, "); a stage runs on one rank"));
        }
      } else {
        communicates = true;
      }
      actions.push_back(*action);
    }
    // A line of empty cells would be a rank without a stage, which a pipeline rank never is.
    if (std::none_of(actions.begin(), actions.end(),
                     [](const Action& a) { return IsCompute(a.type); })) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", line, ": rank ", rank,
                                                     " runs no stage (no compute action); "
                                                     "every pipeline rank holds a stage"));
    }
  }
  if (static_cast<int>(schedule.actions.size()) != ranks) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": expected ", ranks,
                                                   " rank lines (the pipeline degree), found ",
                                                   schedule.actions.size()));
  }
  // Stages are numbered 0 to stages - 1 with no gap; checked before sizing anything by them.
  int stage = 0;
  for (const auto& [s, placement] : placed) {
    if (s != stage) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": no compute action of stage ", stage,
                                                     ", expected stages 0 to ",
                                                     placed.rbegin()->first, " each on one rank"));
    }
    schedule.stage_rank.push_back(placement.rank);
    ++stage;
  }
  schedule.stages = stage;
  schedule.lowered = communicates;
  schedule = Lower(schedule);
  if (absl::Status status = Check(schedule); !status.ok()) {
    return absl::Status(status.code(), absl::StrCat(path, ": ", status.message()));
  }
  return schedule;
}

std::string WriteCsv(const Schedule& schedule) {
  std::string out = absl::StrCat("# ", schedule.name, ": ", schedule.ranks, " ranks, ",
                                 schedule.stages, " stages, ", schedule.microbatches,
                                 " microbatches; line r holds rank r's actions in order\n");
  for (const std::vector<Action>& actions : schedule.actions) {
    absl::StrAppend(
        &out,
        absl::StrJoin(actions, ",",
                      [](std::string* s, const Action& a) { s->append(ActionName(a)); }),
        "\n");
  }
  return out;
}

}  // namespace titan::pp
