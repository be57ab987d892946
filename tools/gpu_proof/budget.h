// The proof's time: each part has a budget in seconds, set for an overall deadline of 600 s
// and scaled with --deadline-s; a part gets its budget or what is left before the deadline,
// whichever is less.
#ifndef TITAN_TOOLS_GPU_PROOF_BUDGET_H_
#define TITAN_TOOLS_GPU_PROOF_BUDGET_H_

#include <string>
#include <vector>

namespace titan::gpu_proof {

constexpr double kDefaultDeadlineS = 600;
// A part with less time than this left is not started: nothing useful runs in it.
constexpr double kShortestPartS = 1;

struct PartBudget {
  std::string name;
  double budget_s = 0;
};

// The parts in the order they run, with their budgets scaled to `deadline_s`.
std::vector<PartBudget> PartBudgets(double deadline_s);

// The seconds a part may run: its budget, or what is left before the deadline when less;
// 0 when less than kShortestPartS is left (the part is not run).
double PartLimitS(double budget_s, double elapsed_s, double deadline_s);

// The share of `left_s` for one of several runs still to come, by weight: a run that hangs
// takes its share, not the time of the runs after it.
double ShareS(double left_s, double weight, double weights_left);

}  // namespace titan::gpu_proof

#endif  // TITAN_TOOLS_GPU_PROOF_BUDGET_H_
