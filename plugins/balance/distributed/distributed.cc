// distributed: every controller is an agent that knows only its neighbours (the controllers
// sharing a potential switch with it) and the loads they send it. Agents run on a pool of
// threads in synchronous rounds separated by barriers:
//   1. publish: an agent whose load changed sends it to its neighbours;
//   2. propose: an overloaded agent (above its neighbourhood's mean load; any agent once no
//      overloaded one can propose) plans, heaviest switch first, moves to neighbours that would
//      stay below it (planned neighbour load + w < its own planned load) and sends each proposal,
//      carrying its load before that move;
//   3. answer: an agent that proposed nothing takes its proposals in (sender, order) sequence and
//      accepts each that keeps it below the sender's carried load; a proposer rejects them all;
//   4. apply: senders hand over the accepted switches.
// Taken in (sender, order) sequence every accepted move is improving (common/local_search.h),
// so the sum of squared loads falls each round; and the lightest receiver of a round accepts
// its first proposal, so every round with proposals moves a switch. The rounds end when no agent
// can propose: no improving single move is left. The answer does not depend on thread timing.
//
// Most rounds of the long tail change a few agents only, so an agent re-plans only when its
// plan could differ from the empty one it made last time: it proposed last round, its switches
// or load changed, a neighbour published a new load, or the rule for who may propose changed.
// Otherwise it would plan the same nothing again, so skipping it changes no answer. Each agent
// keeps its switches sorted heaviest first, re-sorting only when it accepts some, with their
// loads beside them, and the potential lists are laid out by starting controller, so that
// planning reads memory in order (it was bound by cache misses).
#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <limits>
#include <mutex>
#include <system_error>
#include <thread>

#include "absl/strings/str_cat.h"
#include "plugins/balance/common/flow_bound.h"
#include "plugins/balance/common/hot_region.h"
#include "plugins/balance/common/instance.h"
#include "plugins/balance/common/local_search.h"
#include "plugins/balance/common/rebalance.h"

namespace titan::balance {
namespace {

// A switch as the agent holding it sees it: its load and where its potential controllers lie in
// Agents::candidates_.
struct Held {
  double load;
  int32_t switch_index;
  int32_t first, end;
  uint64_t candidate_bits;  // bit b % 64 for each potential controller b
};

inline uint64_t ControllerBit(int32_t b) { return uint64_t{1} << (b % 64); }

struct Proposal {
  int32_t switch_index;
  int32_t to;
  double sender_load;  // the sender's planned load before this move
  bool accepted;
};

class Agents {
 public:
  // `target`: +inf to run until no improving move is left; else only agents above it propose,
  // each until its planned load is at most the target.
  Agents(const BalanceProblem& problem, std::vector<int32_t> assignment, double target)
      : problem_(problem),
        target_(target),
        assignment_(std::move(assignment)),
        tolerance_(LoadTolerance(problem)),
        uncapacitated_(std::all_of(problem.controller_capacity.begin(),
                                   problem.controller_capacity.end(),
                                   [](double capacity) { return std::isinf(capacity); })),
        load_(ControllerLoads(problem, assignment_)),
        published_(problem.num_controllers(), -1.0),
        notified_in_(problem.num_controllers()),
        replan_(problem.num_controllers(), 1),
        owned_(problem.num_controllers()),
        candidates_begin_(problem.num_switches()),
        neighbours_(problem.num_controllers()),
        outbox_(problem.num_controllers()),
        inbox_(problem.num_controllers()),
        inbox_lock_(problem.num_controllers()) {
    std::vector<std::vector<int32_t>> starting(problem.num_controllers());
    for (int s = 0; s < problem.num_switches(); ++s) starting[assignment_[s]].push_back(s);
    for (const std::vector<int32_t>& switches : starting) {
      for (int32_t s : switches) {
        candidates_begin_[s] = static_cast<int32_t>(candidates_.size());
        candidates_.insert(candidates_.end(), problem.potential[s].begin(),
                           problem.potential[s].end());
      }
    }
    for (int s = 0; s < problem.num_switches(); ++s) owned_[assignment_[s]].push_back(MakeHeld(s));
    for (std::vector<Held>& mine : owned_) std::sort(mine.begin(), mine.end(), HeavierFirst);
    FindNeighbours();
    for (std::atomic<int64_t>& round : notified_in_) round.store(-1);
  }

  // Runs rounds until none has a proposal or `max_rounds` have run.
  void Run(int num_threads, int64_t max_rounds) {
    const int m = problem_.num_controllers();
    num_threads = std::max(1, std::min(num_threads, m));
    // Runs once per barrier phase, on one thread, while the others wait.
    int phase = 0;
    auto between_phases = [this, &phase, max_rounds]() noexcept {
      if (phase == 1) {  // after proposing
        ++rounds_;
        // Overloaded agents propose first; only when none can do all agents try, and the
        // rounds end when even then nobody proposes.
        done_ = (proposals_.load() == 0 && (everyone_ || targeted())) || rounds_ >= max_rounds;
        rule_changed_ = everyone_ != (proposals_.load() == 0);
        everyone_ = proposals_.load() == 0;
        messages_ += 2 * proposals_.load();  // each proposal and its answer
        proposals_ = 0;
      }
      phase = (phase + 1) % 4;
    };
    std::barrier sync(num_threads, between_phases);
    auto agent_loop = [&](int thread) {
      const int begin = static_cast<int>(int64_t{m} * thread / num_threads);
      const int end = static_cast<int>(int64_t{m} * (thread + 1) / num_threads);
      std::vector<double> planned(m, 0.0);
      while (true) {
        for (int c = begin; c < end; ++c) Publish(c);
        sync.arrive_and_wait();
        for (int c = begin; c < end; ++c) Propose(c, planned);
        sync.arrive_and_wait();
        if (done_) break;
        for (int c = begin; c < end; ++c) Answer(c);
        sync.arrive_and_wait();
        for (int c = begin; c < end; ++c) Apply(c);
        sync.arrive_and_wait();
      }
    };
    std::vector<std::thread> threads;
    for (int t = 1; t < num_threads; ++t) threads.emplace_back(agent_loop, t);
    agent_loop(0);
    for (std::thread& thread : threads) thread.join();
  }

  const std::vector<int32_t>& assignment() const { return assignment_; }
  int64_t rounds() const { return rounds_; }
  int64_t messages() const { return messages_; }

 private:
  // neighbours_[a]: the controllers sharing a potential switch with a, each once, in order.
  void FindNeighbours() {
    const int m = problem_.num_controllers();
    std::vector<std::vector<int32_t>> switches_of(m);
    for (int s = 0; s < problem_.num_switches(); ++s) {
      for (int32_t a : problem_.potential[s]) switches_of[a].push_back(s);
    }
    std::vector<int32_t> listed_for(m, -1);
    for (int32_t a = 0; a < m; ++a) {
      listed_for[a] = a;
      for (int32_t s : switches_of[a]) {
        for (int32_t b : problem_.potential[s]) {
          if (listed_for[b] == a) continue;
          listed_for[b] = a;
          neighbours_[a].push_back(b);
        }
      }
      std::sort(neighbours_[a].begin(), neighbours_[a].end());
    }
  }

  Held MakeHeld(int32_t s) const {
    const int32_t first = candidates_begin_[s];
    uint64_t bits = 0;
    for (int32_t b : problem_.potential[s]) bits |= ControllerBit(b);
    return {problem_.switch_load[s], s, first,
            first + static_cast<int32_t>(problem_.potential[s].size()), bits};
  }

  static bool HeavierFirst(const Held& a, const Held& b) {
    return a.load != b.load ? a.load > b.load : a.switch_index < b.switch_index;
  }

  // Whether c's plan could differ from its last, empty one (see the top of this file).
  bool MustReplan(int c) const {
    return replan_[c] || rule_changed_ ||
           notified_in_[c].load(std::memory_order_relaxed) == rounds_;
  }

  // The publisher marks its neighbours, rather than every agent scanning all its neighbours in
  // every round: in the long tail few publish, and the scans were most of the time (Zipf loads:
  // 6,600 rounds x 1,000 agents x ~100 neighbours).
  void Publish(int c) {
    if (published_[c] == load_[c]) return;
    published_[c] = load_[c];
    for (int32_t b : neighbours_[c]) notified_in_[b].store(rounds_, std::memory_order_relaxed);
    messages_ += static_cast<int64_t>(neighbours_[c].size());
  }

  void Propose(int c, std::vector<double>& planned) {
    if (!MustReplan(c)) return;
    replan_[c] = 0;
    double lightest = load_[c];
    double total = load_[c];
    for (int32_t b : neighbours_[c]) {
      planned[b] = published_[b];
      lightest = std::min(lightest, planned[b]);
      total += planned[b];
    }
    const std::vector<Held>& mine = owned_[c];
    // Not even the smallest switch fits below this agent at its lightest neighbour.
    if (mine.empty() || lightest + mine.back().load >= load_[c] - tolerance_) {
      return;
    }
    if (targeted()) {
      if (load_[c] <= target_ + tolerance_) return;
    } else if (!everyone_) {  // overloaded: above the mean of its neighbourhood
      if (load_[c] * static_cast<double>(neighbours_[c].size() + 1) <= total) return;
    }
    // Planned loads only grow, so `lightest` still bounds them: a switch that does not fit
    // there fits nowhere, and once the smallest does not, none does.
    const double smallest = mine.back().load;
    double own = load_[c];
    // The neighbours that could take even the smallest switch now. Planned loads only grow
    // and `own` only falls, so a switch none of whose controllers is among them can never be
    // proposed: its candidate scan, most of the run, is skipped on the bits alone.
    uint64_t receptive = 0;
    for (int32_t b : neighbours_[c]) {
      if (planned[b] + smallest < own) receptive |= ControllerBit(b);
    }
    for (const Held& held : mine) {
      const double w = held.load;
      if (lightest + smallest >= own - tolerance_ || (targeted() && own <= target_)) break;
      if (lightest + w >= own - tolerance_ || (held.candidate_bits & receptive) == 0) continue;
      const int32_t to = uncapacitated_ ? LightestOther<false>(held, c, w, planned)
                                        : LightestOther<true>(held, c, w, planned);
      if (to < 0 || planned[to] + w >= own - tolerance_) continue;
      outbox_[c].push_back({held.switch_index, to, own, false});
      {
        std::lock_guard<std::mutex> lock(inbox_lock_[to]);
        inbox_[to].push_back({c, static_cast<int32_t>(outbox_[c].size() - 1)});
      }
      own -= w;
      planned[to] += w;
    }
    proposals_ += static_cast<int64_t>(outbox_[c].size());
    replan_[c] = !outbox_[c].empty();
  }

  // The lightest by `planned` of the held switch's potential controllers other than c that
  // have room for w, -1 if none. Checking capacities only where some are finite: this loop
  // was a third of the run.
  template <bool kCapacitated>
  int32_t LightestOther(const Held& held, int32_t c, double w,
                        const std::vector<double>& planned) const {
    int32_t to = -1;
    double lightest = 0.0;
    for (int32_t i = held.first; i < held.end; ++i) {
      const int32_t b = candidates_[i];
      if (b == c) continue;
      const double load = planned[b];
      if (kCapacitated && load + w > problem_.controller_capacity[b]) continue;
      if (to < 0 || load < lightest) to = b, lightest = load;
    }
    return to;
  }

  // A proposer answers too: its own moves out only lower it, so each acceptance stays improving
  // (see the top of this file). When every agent may propose, nearly all do, and rejecting all
  // proposals to proposers left few receivers: thousands of rounds on Zipf loads.
  void Answer(int c) {
    std::vector<std::pair<int32_t, int32_t>>& inbox = inbox_[c];
    std::sort(inbox.begin(), inbox.end());
    std::vector<Held>& mine = owned_[c];
    const size_t before = mine.size();
    for (const auto& [sender, index] : inbox) {
      Proposal& proposal = outbox_[sender][index];
      const double w = problem_.switch_load[proposal.switch_index];
      if (load_[c] + w < proposal.sender_load - tolerance_ &&
          load_[c] + w <= problem_.controller_capacity[c]) {
        proposal.accepted = true;
        load_[c] += w;
        mine.push_back(MakeHeld(proposal.switch_index));
      }
    }
    if (mine.size() != before) {
      const auto taken = mine.begin() + static_cast<ptrdiff_t>(before);
      std::sort(taken, mine.end(), HeavierFirst);
      std::inplace_merge(mine.begin(), taken, mine.end(), HeavierFirst);
      replan_[c] = 1;
    }
    inbox.clear();
  }

  void Apply(int c) {
    std::vector<Proposal>& sent = outbox_[c];
    std::vector<int32_t> leaving;
    for (const Proposal& proposal : sent) {
      if (!proposal.accepted) continue;
      load_[c] -= problem_.switch_load[proposal.switch_index];
      assignment_[proposal.switch_index] = proposal.to;
      leaving.push_back(proposal.switch_index);
    }
    // By its own list, not by assignment_: the switches this agent accepted this round are being
    // handed over by other threads as it runs.
    if (!leaving.empty()) {
      std::sort(leaving.begin(), leaving.end());
      std::erase_if(owned_[c], [&](const Held& held) {
        return std::binary_search(leaving.begin(), leaving.end(), held.switch_index);
      });
      replan_[c] = 1;
    }
    sent.clear();
  }

  bool targeted() const { return std::isfinite(target_); }

  const BalanceProblem& problem_;
  const double target_;
  std::vector<int32_t> assignment_;
  const double tolerance_;
  const bool uncapacitated_;
  std::vector<double> load_;
  std::vector<double> published_;  // what each agent last sent its neighbours
  // The round in which a neighbour last sent each agent a new load (-1: none yet).
  std::vector<std::atomic<int64_t>> notified_in_;
  std::vector<char> replan_;  // per agent, written by its own thread only
  std::vector<std::vector<Held>> owned_;
  std::vector<int32_t> candidates_;        // every P(s), those of one starting controller together
  std::vector<int32_t> candidates_begin_;  // per switch
  std::vector<std::vector<int32_t>> neighbours_;
  std::vector<std::vector<Proposal>> outbox_;
  std::vector<std::vector<std::pair<int32_t, int32_t>>> inbox_;  // (sender, outbox index)
  std::vector<std::mutex> inbox_lock_;
  std::atomic<int64_t> proposals_{0};
  std::atomic<int64_t> messages_{0};
  int64_t rounds_ = 0;
  bool done_ = false;
  bool everyone_ = false;      // whether every agent, not only the overloaded, may propose
  bool rule_changed_ = false;  // whether everyone_ changed after the last proposals
};

}  // namespace

class Distributed : public BalancePlugin {
 public:
  std::vector<ConfigKey> ConfigKeys() const override {
    return {ConfigKey{"threads",
                      ConfigType::kInt,
                      ConfigValue(int64_t{0}),
                      "threads the agents run on; 0: one per core, at most 8",
                      0.0,
                      1024.0,
                      {}},
            ConfigKey{"max_rounds",
                      ConfigType::kInt,
                      ConfigValue(int64_t{100000}),
                      "stop after this many rounds even if agents still propose",
                      1.0,
                      {},
                      {}}};
  }

  absl::Status Configure(const ConfigView& config) override {
    TITAN_ASSIGN_OR_RETURN(int64_t threads, config.GetInt("threads"));
    TITAN_ASSIGN_OR_RETURN(max_rounds_, config.GetInt("max_rounds"));
    threads_ = threads > 0
                   ? static_cast<int>(threads)
                   : static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
    return absl::OkStatus();
  }

  // Agents start from the static regions (each switch at its nearest controller).
  absl::StatusOr<BalanceResult> Assign(const BalanceProblem& problem) override {
    TITAN_RETURN_IF_ERROR(ValidateProblem(problem));
    return Converge(problem, NearestControllers(problem), std::numeric_limits<double>::infinity());
  }

  // The agents continue from `current`, only those above the target proposing; past the budget
  // their moves are made in switch order while each still helps. Where they stop above the
  // target (no agent has an improving move to a neighbour), the escalation of
  // common/hot_region.h (single moves, chains, the hot region's re-solve) continues from their
  // answer, within what is left of the budget; if that too ends above the target, the
  // escalation from `current` alone is taken when it ends lower.
  absl::StatusOr<RebalanceResult> Rebalance(const BalanceProblem& problem,
                                            const std::vector<int32_t>& current,
                                            const RebalanceGoal& goal) override {
    TITAN_RETURN_IF_ERROR(ValidateProblem(problem));
    TITAN_RETURN_IF_ERROR(ValidateAssignment(problem, current));
    TITAN_ASSIGN_OR_RETURN(RebalanceResult result, RebalanceTarget(problem, current, goal));
    Rebalancing state(problem, current);
    if (state.MaxLoad() <= result.target + LoadTolerance(problem)) return result;
    TITAN_ASSIGN_OR_RETURN(BalanceResult converged, Converge(problem, current, result.target));
    const std::vector<Migration> agreed = Diff(current, converged.controller_of);
    if (static_cast<int64_t>(agreed.size()) <= goal.max_moves) {
      for (const Migration& move : agreed) state.Move(move.switch_index, move.to);
    } else {
      ApplyImproving(state, agreed, goal.max_moves);
    }
    TITAN_RETURN_IF_ERROR(ReachTargetOrResolve(state, result.target, goal.max_moves));
    if (state.MaxLoad() > result.target + LoadTolerance(problem)) {
      // The agents' moves can leave the hot region where the escalation no longer drains it
      // (a 7% hotspot x2 on 100k switches: 1.024): the escalation alone, if better.
      Rebalancing escalated(problem, current);
      TITAN_RETURN_IF_ERROR(ReachTargetOrResolve(escalated, result.target, goal.max_moves));
      if (escalated.MaxLoad() < state.MaxLoad() - LoadTolerance(problem)) {
        state.moves = std::move(escalated.moves);
      }
    }
    result.moves = std::move(state.moves);
    return result;
  }

 private:
  absl::StatusOr<BalanceResult> Converge(const BalanceProblem& problem, std::vector<int32_t> start,
                                         double target) {
    Agents agents(problem, std::move(start), target);
    try {
      agents.Run(threads_, max_rounds_);
    } catch (const std::system_error& error) {  // no thread could be started
      return absl::ResourceExhaustedError(
          absl::StrCat("distributed: cannot start the agent threads: ", error.what()));
    }
    BalanceResult result;
    result.controller_of = agents.assignment();
    result.rounds = agents.rounds();
    result.messages = agents.messages();
    result.lower_bound = DensestSetBound(problem, result.controller_of).bound;
    return result;
  }

  int threads_ = 1;
  int64_t max_rounds_ = 100000;
};

}  // namespace titan::balance

TITAN_PLUGIN(titan::BalancePlugin, titan::balance::Distributed, "distributed", "1.0.0",
             "message-passing controller agents migrating switches to lighter neighbours")
