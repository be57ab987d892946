// Schedule names, action text and the dispatch to the generators (schedule_generators.cc).
#include "plugins/parallel/pp/schedule.h"

#include <algorithm>
#include <array>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "plugins/parallel/pp/schedule_generators.h"

namespace titan::pp {
namespace {

// Longest names first so that "SEND_F" is not read as a stage followed by "S...".
constexpr std::array<std::pair<absl::string_view, ActionType>, 8> kTypeNames = {{
    {"SEND_F", ActionType::kSendForward},
    {"RECV_F", ActionType::kRecvForward},
    {"SEND_B", ActionType::kSendBackward},
    {"RECV_B", ActionType::kRecvBackward},
    {"F", ActionType::kForward},
    {"B", ActionType::kBackward},
    {"I", ActionType::kBackwardInput},
    {"W", ActionType::kBackwardWeight},
}};

absl::string_view TypeName(ActionType type) {
  for (const auto& [name, t] : kTypeNames) {
    if (t == type) return name;
  }
  return "?";
}

// Leading decimal digits of `text`, consumed; false when there are none or they overflow.
bool ConsumeNumber(absl::string_view& text, int& value) {
  size_t digits = 0;
  while (digits < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[digits]))) {
    ++digits;
  }
  if (digits == 0 || !absl::SimpleAtoi(text.substr(0, digits), &value)) return false;
  text.remove_prefix(digits);
  return true;
}

struct ScheduleInfo {
  absl::string_view name;
  StagePlacement placement;
  bool multi_stage;
};

constexpr std::array<ScheduleInfo, 7> kSchedules = {{
    {"GPipe", StagePlacement::kLoop, false},
    {"1F1B", StagePlacement::kLoop, false},
    {"Interleaved1F1B", StagePlacement::kLoop, true},
    {"LoopedBFS", StagePlacement::kLoop, true},
    {"InterleavedZeroBubble", StagePlacement::kLoop, true},
    {"ZBVZeroBubble", StagePlacement::kV, true},
    {"DualPipeV", StagePlacement::kV, true},
}};

// Schedule names match case-insensitively, as PyTorch's get_schedule_class does.
absl::StatusOr<ScheduleInfo> FindSchedule(absl::string_view name) {
  for (const ScheduleInfo& info : kSchedules) {
    if (absl::EqualsIgnoreCase(info.name, name)) return info;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown pipeline schedule '", name,
                                                 "': expected one of ",
                                                 absl::StrJoin(ScheduleNames(), ", ")));
}

}  // namespace

bool IsCompute(ActionType type) {
  return type == ActionType::kForward || type == ActionType::kBackward ||
         type == ActionType::kBackwardInput || type == ActionType::kBackwardWeight;
}

std::string ActionName(const Action& action) {
  return absl::StrCat(action.stage, TypeName(action.type), action.microbatch);
}

std::string Excerpt(absl::string_view text) {
  constexpr size_t kMaxBytes = 40;
  if (text.size() <= kMaxBytes) return absl::CHexEscape(text);
  return absl::StrCat(absl::CHexEscape(text.substr(0, kMaxBytes)), "...");
}

absl::StatusOr<Action> ParseAction(absl::string_view text) {
  absl::string_view rest = absl::StripAsciiWhitespace(text);
  auto malformed = [&](absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("action '", Excerpt(text), "': ", what,
                     "; expected [stage][F|B|I|W|SEND_F|RECV_F|SEND_B|RECV_B][microbatch], e.g. "
                     "2F0 or 1SEND_B3"));
  };
  Action action{ActionType::kForward};
  if (!ConsumeNumber(rest, action.stage)) return malformed("no stage number");
  bool typed = false;
  for (const auto& [name, type] : kTypeNames) {
    if (absl::StartsWith(rest, name)) {
      action.type = type;
      rest.remove_prefix(name.size());
      typed = true;
      break;
    }
  }
  if (!typed) return malformed("no action type");
  if (!ConsumeNumber(rest, action.microbatch)) return malformed("no microbatch number");
  if (!rest.empty()) return malformed(absl::StrCat("'", Excerpt(rest), "' after the microbatch"));
  return action;
}

const std::vector<std::string>& ScheduleNames() {
  static const auto* names = [] {
    auto* list = new std::vector<std::string>();
    for (const ScheduleInfo& info : kSchedules) list->emplace_back(info.name);
    return list;
  }();
  return *names;
}

absl::StatusOr<bool> IsMultiStage(absl::string_view name) {
  TITAN_ASSIGN_OR_RETURN(ScheduleInfo info, FindSchedule(name));
  return info.multi_stage;
}

absl::StatusOr<StagePlacement> PlacementOf(absl::string_view name) {
  TITAN_ASSIGN_OR_RETURN(ScheduleInfo info, FindSchedule(name));
  return info.placement;
}

absl::StatusOr<Schedule> Generate(absl::string_view name, int ranks, int stages_per_rank,
                                  int microbatches) {
  TITAN_ASSIGN_OR_RETURN(ScheduleInfo info, FindSchedule(name));
  auto refuse = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline schedule ", info.name, " with ", ranks, " ranks, ", stages_per_rank,
                     " stages per rank and ", microbatches, " microbatches: ", why));
  };
  if (ranks < 1 || stages_per_rank < 1 || microbatches < 1) {
    return refuse("expected at least 1 of each");
  }
  if (!info.multi_stage && stages_per_rank != 1) {
    return refuse("expected 1 stage per rank (a multi-stage schedule runs more)");
  }
  if (info.placement == StagePlacement::kV && stages_per_rank != 2) {
    return refuse("expected 2 stages per rank (V placement)");
  }

  Schedule schedule;
  schedule.name = std::string(info.name);
  schedule.ranks = ranks;
  schedule.stages = ranks * stages_per_rank;
  schedule.microbatches = microbatches;
  schedule.stage_rank.resize(schedule.stages);
  for (int s = 0; s < schedule.stages; ++s) {
    schedule.stage_rank[s] = info.placement == StagePlacement::kV
                                 ? (s < ranks ? s : schedule.stages - 1 - s)
                                 : s % ranks;
  }
  schedule.actions.resize(ranks);

  const GeneratorInput in{ranks, stages_per_rank, microbatches};
  if (info.name == "Interleaved1F1B" || info.name == "InterleavedZeroBubble") {
    // PyTorch's flexible rounds: max(1, m / ranks) rounds that must split m evenly.
    const int rounds = std::max(1, microbatches / ranks);
    if (microbatches % rounds != 0) {
      return refuse(absl::StrCat("expected the microbatches to be a multiple of the ", rounds,
                                 " rounds (max(1, microbatches / ranks))"));
    }
  }
  if (info.name == "DualPipeV" && microbatches < schedule.stages) {
    return refuse(
        absl::StrCat("expected at least as many microbatches as the ", schedule.stages, " stages"));
  }
  for (int r = 0; r < ranks; ++r) {
    std::vector<Action>& out = schedule.actions[r];
    if (info.name == "GPipe") {
      GPipeRank(in, r, out);
    } else if (info.name == "1F1B") {
      OneFOneBRank(in, r, out);
    } else if (info.name == "Interleaved1F1B") {
      InterleavedRank(in, r, /*zero_bubble=*/false, out);
    } else if (info.name == "LoopedBFS") {
      LoopedBfsRank(in, r, out);
    } else if (info.name == "InterleavedZeroBubble") {
      InterleavedRank(in, r, /*zero_bubble=*/true, out);
    } else if (info.name == "ZBVZeroBubble") {
      ZbvRank(in, r, out);
    } else {
      DualPipeVRank(in, r, out);
    }
  }
  return schedule;
}

}  // namespace titan::pp
