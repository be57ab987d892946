#include "tools/gpu_proof/budget.h"

#include <algorithm>

namespace titan::gpu_proof {

std::vector<PartBudget> PartBudgets(double deadline_s) {
  std::vector<PartBudget> parts = {
      {"bundle", 30},  {"kernels", 60}, {"nccl", 30},           {"losses_cpu_vs_cuda", 30},
      {"resume", 45},  {"layouts", 60}, {"replica_groups", 30}, {"throughput", 285},
      {"async_tp", 30}};
  for (PartBudget& part : parts) part.budget_s *= deadline_s / kDefaultDeadlineS;
  return parts;
}

double PartLimitS(double budget_s, double elapsed_s, double deadline_s) {
  const double limit = std::min(budget_s, deadline_s - elapsed_s);
  return limit < kShortestPartS ? 0 : limit;
}

double ShareS(double left_s, double weight, double weights_left) {
  if (left_s <= 0 || weights_left <= 0) return 0;
  return left_s * std::min(1.0, weight / weights_left);
}

}  // namespace titan::gpu_proof
