#include "plugins/balance/common/chain_moves.h"

#include <algorithm>
#include <functional>

#include "plugins/balance/common/instance.h"

namespace titan::balance {
namespace {

// Switches an intermediate controller tries to pass on: they keep a search local.
constexpr size_t kSwitchesTried = 8;

struct Link {
  int32_t switch_index;
  int32_t to;
};

class ChainSearch {
 public:
  ChainSearch(Rebalancing& state, double target, const ChainLimits& limits)
      : limits_(limits),
        state_(state),
        problem_(state.problem),
        target_(target),
        tolerance_(LoadTolerance(state.problem)),
        held_(state.problem.num_controllers()) {
    for (int s = 0; s < problem_.num_switches(); ++s) held_[state.assignment[s]].push_back(s);
    for (std::vector<int32_t>& mine : held_) std::sort(mine.begin(), mine.end(), ByLoad());
  }

  // The shortest chain found that lowers `a` (to the target when `clearing`), empty if none.
  std::vector<Link> Find(int32_t a, bool clearing) {
    origin_ = a;
    const std::vector<int32_t>& mine = held_[a];
    const double excess = state_.loads[a] - target_;
    // Those that clear the excess, smallest first, then the others, largest first.
    const auto clears = std::lower_bound(mine.begin(), mine.end(), excess, BelowLoad());
    std::vector<int32_t> first(clears, mine.end());
    if (!clearing) first.insert(first.end(), std::make_reverse_iterator(clears), mine.rend());
    // A swap must clear too: the switch coming back at most what the one leaving exceeds it by.
    swap_limit_ = [&, excess](double leaving) { return clearing ? leaving - excess : leaving; };
    for (int length = 1; length <= limits_.max_length; ++length) {
      steps_ = 0;
      for (int32_t s : first) {
        const double w = problem_.switch_load[s];
        if (w <= tolerance_) continue;
        for (int32_t b : problem_.potential[s]) {
          if (b == a) continue;
          chain_ = {{s, b}};
          visited_ = {a, b};
          if (Extend(b, w, length - 1)) return chain_;
          if (steps_ > limits_.search_steps) break;
        }
        if (steps_ > limits_.search_steps) break;
      }
    }
    return {};
  }

  // Makes `chain`, last move first.
  void Make(const std::vector<Link>& chain) {
    for (auto link = chain.rbegin(); link != chain.rend(); ++link) {
      const int32_t s = link->switch_index;
      std::vector<int32_t>& from = held_[state_.assignment[s]];
      from.erase(std::lower_bound(from.begin(), from.end(), s, ByLoad()));
      std::vector<int32_t>& to = held_[link->to];
      to.insert(std::lower_bound(to.begin(), to.end(), s, ByLoad()), s);
      state_.Move(s, link->to);
    }
  }

 private:
  struct Lighter {
    const std::vector<double>* w = nullptr;
    bool operator()(int32_t a, int32_t b) const {
      return (*w)[a] != (*w)[b] ? (*w)[a] < (*w)[b] : a < b;
    }
  };
  Lighter ByLoad() const { return {&problem_.switch_load}; }
  struct LighterThanLoad {
    const std::vector<double>* w = nullptr;
    bool operator()(int32_t a, double load) const { return (*w)[a] < load; }
  };
  LighterThanLoad BelowLoad() const { return {&problem_.switch_load}; }

  bool Fits(int32_t c, double load) const {
    return load <= target_ + tolerance_ && load <= problem_.controller_capacity[c];
  }

  // Whether controller b, receiving `incoming`, ends within the target, passing on at most
  // `links_left` more switches; on success chain_ holds the whole chain.
  bool Extend(int32_t b, double incoming, int links_left) {
    ++steps_;
    const double load = state_.loads[b] + incoming;
    if (Fits(b, load)) return true;
    if (links_left == 0 || steps_ > limits_.search_steps) return false;
    const std::vector<int32_t>& mine = held_[b];
    const double need = load - target_;
    size_t tried = 0;
    for (auto it = std::lower_bound(mine.begin(), mine.end(), need - tolerance_, BelowLoad());
         it != mine.end() && tried < kSwitchesTried; ++it) {
      const int32_t s = *it;
      const double w = problem_.switch_load[s];
      if (!Fits(b, load - w)) continue;
      ++tried;
      for (int32_t c : problem_.potential[s]) {
        if (c == b) continue;
        if (c == origin_) {  // a swap: the origin takes back less than it gave
          if (w < swap_limit_(problem_.switch_load[chain_.front().switch_index]) - tolerance_) {
            chain_.push_back({s, c});
            return true;
          }
          continue;
        }
        if (std::find(visited_.begin(), visited_.end(), c) != visited_.end()) continue;
        chain_.push_back({s, c});
        visited_.push_back(c);
        if (Extend(c, w, links_left - 1)) return true;
        chain_.pop_back();
        visited_.pop_back();
        if (steps_ > limits_.search_steps) return false;
      }
    }
    return false;
  }

  const ChainLimits limits_;
  Rebalancing& state_;
  const BalanceProblem& problem_;
  const double target_;
  const double tolerance_;
  std::vector<std::vector<int32_t>> held_;  // per controller, lightest switch first
  int32_t origin_ = -1;
  std::function<double(double)> swap_limit_;  // the most a swap may bring back to the origin
  std::vector<Link> chain_;
  std::vector<int32_t> visited_;
  int64_t steps_ = 0;
};

}  // namespace

int64_t MoveChainsTowardTarget(Rebalancing& state, double target, int64_t max_moves, bool clearing,
                               const ChainLimits& limits) {
  const double tolerance = LoadTolerance(state.problem);
  ChainSearch search(state, target, limits);
  int64_t made = 0;
  for (bool progress = true; progress;) {
    progress = false;
    std::vector<int32_t> above;
    for (int c = 0; c < state.problem.num_controllers(); ++c) {
      if (state.loads[c] > target + tolerance) above.push_back(c);
    }
    std::sort(above.begin(), above.end(),
              [&](int32_t a, int32_t b) { return state.loads[a] > state.loads[b]; });
    for (int32_t a : above) {
      while (state.loads[a] > target + tolerance) {
        const std::vector<Link> chain = search.Find(a, clearing);
        if (chain.empty() || made + static_cast<int64_t>(chain.size()) > max_moves) break;
        search.Make(chain);
        made += static_cast<int64_t>(chain.size());
        progress = true;
      }
    }
  }
  return made;
}

}  // namespace titan::balance
