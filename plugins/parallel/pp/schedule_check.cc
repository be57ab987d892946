// Lower, and the simulation behind Check and TheoreticalBubble.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "plugins/parallel/pp/schedule.h"

namespace titan::pp {
namespace {

// Time units of each action: F 1, B 2, I 1, W 1; communication is free.
int64_t Cost(ActionType type) {
  if (type == ActionType::kBackward) return 2;
  return IsCompute(type) ? 1 : 0;
}

// Whether stage `neighbor` exists and runs on another rank than `stage`.
bool CrossesRanks(const Schedule& s, int stage, int neighbor) {
  return neighbor >= 0 && neighbor < static_cast<int>(s.stage_rank.size()) &&
         s.stage_rank[stage] != s.stage_rank[neighbor];
}

constexpr int64_t kNever = -1;

// Per (stage, microbatch): when each event happened (kNever until it does), and where the sends
// sit so an unmatched one can be named.
struct Events {
  explicit Events(const Schedule& s)
      : size(static_cast<size_t>(std::max(0, s.stages)) * std::max(0, s.microbatches)),
        microbatches(s.microbatches),
        forward(size, kNever),
        backward(size, kNever),
        weight(size, kNever),
        recv_forward(size, kNever),
        recv_backward(size, kNever),
        send_forward(size, kNever),
        send_backward(size, kNever),
        split(size, false),
        send_forward_at(size, -1),
        send_backward_at(size, -1),
        received_forward(size, false),
        received_backward(size, false) {}
  size_t At(int stage, int microbatch) const {
    return static_cast<size_t>(stage) * microbatches + microbatch;
  }
  size_t size;
  int microbatches;
  std::vector<int64_t> forward, backward, weight, recv_forward, recv_backward, send_forward,
      send_backward;
  std::vector<bool> split;  // the backward ran as I (then W), not B
  std::vector<int> send_forward_at, send_backward_at;
  std::vector<bool> received_forward, received_backward;
};

struct Simulation {
  int64_t makespan = 0;
  int64_t work = 0;
};

class Simulator {
 public:
  // Sized for any input: CheckShape refuses a bad shape before anything is indexed.
  explicit Simulator(const Schedule& s)
      : s_(s), ev_(s), pc_(std::max(0, s.ranks), 0), clock_(std::max(0, s.ranks), 0) {}

  absl::StatusOr<Simulation> Run() {
    TITAN_RETURN_IF_ERROR(CheckShape());
    for (bool progress = true; progress;) {
      progress = false;
      for (int r = 0; r < s_.ranks; ++r) {
        while (pc_[r] < static_cast<int>(s_.actions[r].size())) {
          TITAN_ASSIGN_OR_RETURN(bool ran, Step(r));
          if (!ran) break;
          progress = true;
          ++pc_[r];
        }
      }
    }
    TITAN_RETURN_IF_ERROR(Deadlock());
    TITAN_RETURN_IF_ERROR(Complete());
    Simulation result;
    for (int r = 0; r < s_.ranks; ++r) result.makespan = std::max(result.makespan, clock_[r]);
    result.work = work_;
    return result;
  }

 private:
  absl::Status CheckShape() const {
    if (s_.ranks < 1 || s_.microbatches < 1 || s_.stages < 1 ||
        static_cast<int>(s_.actions.size()) != s_.ranks ||
        static_cast<int>(s_.stage_rank.size()) != s_.stages) {
      return absl::InvalidArgumentError(absl::StrCat(
          "schedule ", s_.name,
          ": expected at least 1 rank, stage and microbatch, one action "
          "list per rank and one rank per stage; found ",
          s_.ranks, " ranks, ", s_.stages, " stages, ", s_.microbatches, " microbatches, ",
          s_.actions.size(), " action lists, ", s_.stage_rank.size(), " stage ranks"));
    }
    for (int stage = 0; stage < s_.stages; ++stage) {
      if (s_.stage_rank[stage] < 0 || s_.stage_rank[stage] >= s_.ranks) {
        return absl::InvalidArgumentError(absl::StrCat("schedule ", s_.name, ": stage ", stage,
                                                       " is placed on rank ", s_.stage_rank[stage],
                                                       ", expected 0 to ", s_.ranks - 1));
      }
    }
    if (!s_.lowered && s_.ranks > 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          "schedule ", s_.name, " holds compute actions only: lower it (Lower) before Check"));
    }
    return absl::OkStatus();
  }

  absl::Status Violation(int rank, absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("schedule ", s_.name, ": rank ", rank, ", action ", pc_[rank], " (",
                     ActionName(s_.actions[rank][pc_[rank]]), "): ", what));
  }

  // Runs rank r's next action: true when it ran, false when it waits for a send elsewhere.
  absl::StatusOr<bool> Step(int r) {
    const Action& a = s_.actions[r][pc_[r]];
    if (a.stage < 0 || a.stage >= s_.stages) {
      return Violation(r, absl::StrCat("stage out of range: expected 0 to ", s_.stages - 1));
    }
    if (a.microbatch < 0 || a.microbatch >= s_.microbatches) {
      return Violation(
          r, absl::StrCat("microbatch out of range: expected 0 to ", s_.microbatches - 1));
    }
    if (s_.stage_rank[a.stage] != r) {
      return Violation(r,
                       absl::StrCat("stage ", a.stage, " runs on rank ", s_.stage_rank[a.stage]));
    }
    const size_t at = ev_.At(a.stage, a.microbatch);
    const std::string mb = absl::StrCat(a.microbatch);
    auto done = [&](std::vector<int64_t>& event) {
      event[at] = clock_[r];
      return true;
    };
    switch (a.type) {
      case ActionType::kForward:
        if (ev_.forward[at] != kNever) return Violation(r, "the forward runs twice");
        TITAN_RETURN_IF_ERROR(NeedInput(r, /*forward=*/true));
        Run(r, a.type);
        return done(ev_.forward);
      case ActionType::kBackward:
      case ActionType::kBackwardInput:
        if (ev_.backward[at] != kNever) return Violation(r, "the backward runs twice");
        if (ev_.forward[at] == kNever) {
          return Violation(r, absl::StrCat("runs before its forward ", a.stage, "F", mb));
        }
        TITAN_RETURN_IF_ERROR(NeedInput(r, /*forward=*/false));
        ev_.split[at] = a.type == ActionType::kBackwardInput;
        Run(r, a.type);
        return done(ev_.backward);
      case ActionType::kBackwardWeight:
        if (ev_.weight[at] != kNever) return Violation(r, "the weight gradient runs twice");
        if (ev_.backward[at] == kNever || !ev_.split[at]) {
          return Violation(r, absl::StrCat("expected ", a.stage, "I", mb, " before it"));
        }
        Run(r, a.type);
        return done(ev_.weight);
      case ActionType::kSendForward:
        TITAN_RETURN_IF_ERROR(NeedPeer(r, a.stage + 1));
        if (ev_.forward[at] == kNever) {
          return Violation(r, absl::StrCat("expected ", a.stage, "F", mb, " before it"));
        }
        if (ev_.send_forward[at] != kNever) return Violation(r, "sent twice");
        ev_.send_forward_at[at] = pc_[r];
        return done(ev_.send_forward);
      case ActionType::kSendBackward:
        TITAN_RETURN_IF_ERROR(NeedPeer(r, a.stage - 1));
        if (ev_.backward[at] == kNever) {
          return Violation(r, absl::StrCat("expected ", a.stage, "B", mb, " or ", a.stage, "I", mb,
                                           " before it"));
        }
        if (ev_.send_backward[at] != kNever) return Violation(r, "sent twice");
        ev_.send_backward_at[at] = pc_[r];
        return done(ev_.send_backward);
      case ActionType::kRecvForward:
        return Receive(r, a.stage - 1, ev_.send_forward, ev_.received_forward, ev_.recv_forward);
      case ActionType::kRecvBackward:
        return Receive(r, a.stage + 1, ev_.send_backward, ev_.received_backward, ev_.recv_backward);
    }
    return Violation(r, "unknown action type");
  }

  void Run(int r, ActionType type) {
    clock_[r] += Cost(type);
    work_ += Cost(type);
  }

  // A compute action's input (the activation from stage - 1 for a forward, the gradient from
  // stage + 1 for a backward): made earlier on this rank, or received earlier.
  absl::Status NeedInput(int r, bool forward) const {
    const Action& a = s_.actions[r][pc_[r]];
    const int from = forward ? a.stage - 1 : a.stage + 1;
    if (from < 0 || from >= s_.stages) return absl::OkStatus();
    const int m = a.microbatch;
    if (!CrossesRanks(s_, a.stage, from)) {
      const std::vector<int64_t>& made = forward ? ev_.forward : ev_.backward;
      if (made[ev_.At(from, m)] != kNever) return absl::OkStatus();
      return Violation(
          r, forward ? absl::StrCat("expected ", from, "F", m, " before it")
                     : absl::StrCat("expected ", from, "B", m, " or ", from, "I", m, " before it"));
    }
    const std::vector<int64_t>& received = forward ? ev_.recv_forward : ev_.recv_backward;
    if (received[ev_.At(a.stage, m)] != kNever) return absl::OkStatus();
    const ActionType recv = forward ? ActionType::kRecvForward : ActionType::kRecvBackward;
    return Violation(r, absl::StrCat("expected ", ActionName({recv, a.stage, m}), " before it"));
  }

  // A send or receive needs its peer stage on another rank.
  absl::Status NeedPeer(int r, int peer) const {
    const Action& a = s_.actions[r][pc_[r]];
    if (peer < 0 || peer >= s_.stages) {
      return Violation(r, absl::StrCat("there is no stage ", peer, " to exchange with"));
    }
    if (!CrossesRanks(s_, a.stage, peer)) {
      return Violation(r, absl::StrCat("stage ", peer,
                                       " runs on the same rank: nothing to send "
                                       "or receive"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<bool> Receive(int r, int peer, const std::vector<int64_t>& sent,
                               std::vector<bool>& matched, std::vector<int64_t>& received) {
    const Action& a = s_.actions[r][pc_[r]];
    TITAN_RETURN_IF_ERROR(NeedPeer(r, peer));
    const size_t at = ev_.At(a.stage, a.microbatch);
    if (received[at] != kNever) return Violation(r, "received twice");
    const size_t from = ev_.At(peer, a.microbatch);
    if (sent[from] == kNever) return false;
    matched[from] = true;
    clock_[r] = std::max(clock_[r], sent[from]);
    received[at] = clock_[r];
    return true;
  }

  absl::Status Deadlock() const {
    std::vector<std::string> blocked;
    for (int r = 0; r < s_.ranks; ++r) {
      if (pc_[r] >= static_cast<int>(s_.actions[r].size())) continue;
      const Action& a = s_.actions[r][pc_[r]];
      const bool forward = a.type == ActionType::kRecvForward;
      const int peer = forward ? a.stage - 1 : a.stage + 1;
      const Action send{forward ? ActionType::kSendForward : ActionType::kSendBackward, peer,
                        a.microbatch};
      blocked.push_back(absl::StrCat("rank ", r, ", action ", pc_[r], " (", ActionName(a),
                                     ") waits for ", ActionName(send), " on rank ",
                                     s_.stage_rank[peer]));
    }
    if (blocked.empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("schedule ", s_.name, " deadlocks: ", absl::StrJoin(blocked, "; ")));
  }

  // Every send was received; every (stage, microbatch) ran forward and backward once.
  absl::Status Complete() const {
    for (int stage = 0; stage < s_.stages; ++stage) {
      for (int m = 0; m < s_.microbatches; ++m) {
        const size_t at = ev_.At(stage, m);
        for (bool forward : {true, false}) {
          const std::vector<int64_t>& sent = forward ? ev_.send_forward : ev_.send_backward;
          const std::vector<bool>& matched = forward ? ev_.received_forward : ev_.received_backward;
          if (sent[at] == kNever || matched[at]) continue;
          const int r = s_.stage_rank[stage];
          const int index = forward ? ev_.send_forward_at[at] : ev_.send_backward_at[at];
          return absl::InvalidArgumentError(
              absl::StrCat("schedule ", s_.name, ": rank ", r, ", action ", index, " (",
                           ActionName(s_.actions[r][index]), "): never received by rank ",
                           s_.stage_rank[forward ? stage + 1 : stage - 1]));
        }
      }
    }
    for (int stage = 0; stage < s_.stages; ++stage) {
      for (int m = 0; m < s_.microbatches; ++m) {
        const size_t at = ev_.At(stage, m);
        auto missing = [&](absl::string_view what) {
          return absl::InvalidArgumentError(absl::StrCat("schedule ", s_.name, ": rank ",
                                                         s_.stage_rank[stage], " never runs ", what,
                                                         " of stage ", stage, ", microbatch ", m));
        };
        if (ev_.forward[at] == kNever) return missing("the forward (F)");
        if (ev_.backward[at] == kNever) return missing("the backward (B or I)");
        if (ev_.split[at] && ev_.weight[at] == kNever) return missing("the weight gradient (W)");
      }
    }
    return absl::OkStatus();
  }

  const Schedule& s_;
  Events ev_;
  std::vector<int> pc_;
  std::vector<int64_t> clock_;
  int64_t work_ = 0;
};

}  // namespace

Schedule Lower(const Schedule& compute_only) {
  if (compute_only.lowered) return compute_only;
  Schedule lowered = compute_only;
  lowered.lowered = true;
  for (size_t r = 0; r < compute_only.actions.size(); ++r) {
    std::vector<Action>& out = lowered.actions[r];
    out.clear();
    for (const Action& a : compute_only.actions[r]) {
      const bool in_range = a.stage >= 0 && a.stage < static_cast<int>(lowered.stage_rank.size());
      const bool forward = a.type == ActionType::kForward;
      const bool backward = a.type == ActionType::kBackward || a.type == ActionType::kBackwardInput;
      // Forward data flows from stage - 1 to stage + 1, gradients the other way.
      const int from = forward ? a.stage - 1 : a.stage + 1;
      const int to = forward ? a.stage + 1 : a.stage - 1;
      if (in_range && (forward || backward) && CrossesRanks(lowered, a.stage, from)) {
        out.push_back({forward ? ActionType::kRecvForward : ActionType::kRecvBackward, a.stage,
                       a.microbatch});
      }
      out.push_back(a);
      if (in_range && (forward || backward) && CrossesRanks(lowered, a.stage, to)) {
        out.push_back({forward ? ActionType::kSendForward : ActionType::kSendBackward, a.stage,
                       a.microbatch});
      }
    }
  }
  return lowered;
}

absl::Status Check(const Schedule& lowered) { return Simulator(lowered).Run().status(); }

absl::StatusOr<double> TheoreticalBubble(const Schedule& lowered) {
  TITAN_ASSIGN_OR_RETURN(Simulation sim, Simulator(lowered).Run());
  if (sim.makespan == 0) return 0.0;
  // Idle over total as one division of exact integers, so equal ratios give equal doubles.
  const int64_t total = lowered.ranks * sim.makespan;
  return static_cast<double>(total - sim.work) / static_cast<double>(total);
}

int PeakInFlight(const Schedule& schedule, int rank) {
  if (rank < 0 || rank >= static_cast<int>(schedule.actions.size())) return 0;
  int now = 0, peak = 0;
  for (const Action& a : schedule.actions[rank]) {
    if (a.type == ActionType::kForward) peak = std::max(peak, ++now);
    // A split backward keeps the stage's saved inputs until its W.
    if (a.type == ActionType::kBackward || a.type == ActionType::kBackwardWeight) --now;
  }
  return peak;
}

}  // namespace titan::pp
