#include "plugins/parallel/pp/exchanges.h"

#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace titan::pp {
namespace {

// One send or receive of the schedule.
struct Message {
  int rank = 0, action = 0, step = 0;  // where it sits
  int peer = 0, tag = 0;
  bool send = false;
  int partner = -1;  // the message it pairs with
  bool done = false;
};

Message Describe(const Schedule& s, int rank, int action, int step) {
  const Action& a = s.actions[rank][action];
  const int m = a.microbatch;
  Message message{rank, action, step};
  switch (a.type) {
    case ActionType::kSendForward:
      message = {rank,
                 action,
                 step,
                 s.stage_rank[a.stage + 1],
                 MessageTag(a.stage + 1, m, s.microbatches, false),
                 true};
      break;
    case ActionType::kRecvForward:
      message = {rank,
                 action,
                 step,
                 s.stage_rank[a.stage - 1],
                 MessageTag(a.stage, m, s.microbatches, false),
                 false};
      break;
    case ActionType::kSendBackward:
      message = {rank,
                 action,
                 step,
                 s.stage_rank[a.stage - 1],
                 MessageTag(a.stage, m, s.microbatches, true),
                 true};
      break;
    default:  // kRecvBackward: GroupExchanges puts no compute action in an exchange
      message = {rank,
                 action,
                 step,
                 s.stage_rank[a.stage + 1],
                 MessageTag(a.stage + 1, m, s.microbatches, true),
                 false};
      break;
  }
  return message;
}

class ExchangeSimulator {
 public:
  explicit ExchangeSimulator(const Schedule& s) : s_(s) {
    for (int r = 0; r < s.ranks; ++r) {
      steps_.push_back(GroupExchanges(s.actions[r]));
      step_messages_.emplace_back(steps_.back().size());
      for (size_t step = 0; step < steps_.back().size(); ++step) {
        if (!steps_.back()[step].exchange) continue;
        for (int action : steps_.back()[step].actions) {
          step_messages_[r][step].push_back(static_cast<int>(messages_.size()));
          messages_.push_back(Describe(s, r, action, static_cast<int>(step)));
        }
      }
    }
  }

  absl::Status Run() {
    TITAN_RETURN_IF_ERROR(PairByTag());
    std::vector<size_t> pc(steps_.size(), 0);
    for (bool progress = true; progress;) {
      progress = false;
      for (size_t r = 0; r < steps_.size(); ++r) {
        while (pc[r] < steps_[r].size()) {
          bool complete = true;
          for (int id : step_messages_[r][pc[r]]) {
            Message& message = messages_[id];
            if (message.done) continue;
            Message& partner = messages_[message.partner];
            if (pc[partner.rank] == static_cast<size_t>(partner.step)) {
              message.done = partner.done = true;
              progress = true;
            } else {
              complete = false;
            }
          }
          if (!complete) break;
          ++pc[r];
          progress = true;
        }
      }
    }
    std::vector<std::string> blocked;
    for (size_t r = 0; r < steps_.size(); ++r) {
      if (pc[r] == steps_[r].size()) continue;
      for (int id : step_messages_[r][pc[r]]) {
        const Message& message = messages_[id];
        if (message.done) continue;
        const Message& partner = messages_[message.partner];
        blocked.push_back(absl::StrCat("rank ", r, ", action ", message.action, " (", Name(message),
                                       ") waits for ", Name(partner), " on rank ", partner.rank));
        break;
      }
    }
    if (blocked.empty()) return CheckIssueOrder();
    return absl::InvalidArgumentError(absl::StrCat(
        "schedule ", s_.name,
        " deadlocks once each run of sends and receives is one exchange that completes as a "
        "whole: ",
        absl::StrJoin(blocked, "; ")));
  }

 private:
  std::string Name(const Message& message) const {
    return ActionName(s_.actions[message.rank][message.action]);
  }

  // Pairs each receive with the send of its tag, as MPI does (Check proved there is one).
  absl::Status PairByTag() {
    std::map<std::tuple<int, int, int>, int> sent;  // (from, to, tag) -> id
    for (int id = 0; id < static_cast<int>(messages_.size()); ++id) {
      const Message& m = messages_[id];
      if (m.send) sent[{m.rank, m.peer, m.tag}] = id;
    }
    for (int id = 0; id < static_cast<int>(messages_.size()); ++id) {
      Message& m = messages_[id];
      if (m.send) continue;
      auto found = sent.find({m.peer, m.rank, m.tag});
      if (found == sent.end()) {
        return absl::InvalidArgumentError(absl::StrCat("schedule ", s_.name, ": rank ", m.rank,
                                                       ", action ", m.action, " (", Name(m),
                                                       ") has no matching send"));
      }
      m.partner = found->second;
      messages_[found->second].partner = id;
    }
    for (const Message& m : messages_) {
      if (m.partner < 0) {
        return absl::InvalidArgumentError(absl::StrCat("schedule ", s_.name, ": rank ", m.rank,
                                                       ", action ", m.action, " (", Name(m),
                                                       ") is never received"));
      }
    }
    return absl::OkStatus();
  }

  // The k-th send from rank a to rank b must meet b's k-th receive from a: how a communicator
  // without tags (NCCL) pairs them.
  absl::Status CheckIssueOrder() const {
    std::map<std::pair<int, int>, std::vector<int>> sends, receives;  // (from, to) -> ids
    for (int id = 0; id < static_cast<int>(messages_.size()); ++id) {
      const Message& m = messages_[id];
      (m.send ? sends[{m.rank, m.peer}] : receives[{m.peer, m.rank}]).push_back(id);
    }
    for (const auto& [route, sent] : sends) {
      auto found = receives.find(route);  // every send has its receive (PairByTag)
      if (found == receives.end()) continue;
      const std::vector<int>& received = found->second;
      for (size_t k = 0; k < sent.size() && k < received.size(); ++k) {
        if (messages_[sent[k]].partner == received[k]) continue;
        const Message& send = messages_[sent[k]];
        return absl::InvalidArgumentError(absl::StrCat(
            "schedule ", s_.name, ": rank ", route.first, ", action ", send.action, " (",
            Name(send), ") is send number ", k + 1, " to rank ", route.second,
            ", whose receive number ", k + 1, " is ", Name(messages_[received[k]]),
            ": a communicator without message tags (nccl) pairs sends and receives in the order "
            "they are issued, so both ranks must issue them in the same order"));
      }
    }
    return absl::OkStatus();
  }

  const Schedule& s_;
  std::vector<std::vector<ExchangeStep>> steps_;
  std::vector<std::vector<std::vector<int>>> step_messages_;  // rank -> step -> message ids
  std::vector<Message> messages_;
};

}  // namespace

int MessageTag(int stage, int microbatch, int microbatches, bool gradient) {
  return 2 * (stage * microbatches + microbatch) + (gradient ? 1 : 0);
}

std::vector<ExchangeStep> GroupExchanges(const std::vector<Action>& actions) {
  std::vector<ExchangeStep> steps;
  for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
    const bool exchange = !IsCompute(actions[i].type);
    if (!exchange || steps.empty() || !steps.back().exchange) steps.push_back({exchange, {}});
    steps.back().actions.push_back(i);
  }
  return steps;
}

absl::Status CheckExchanges(const Schedule& lowered) { return ExchangeSimulator(lowered).Run(); }

}  // namespace titan::pp
