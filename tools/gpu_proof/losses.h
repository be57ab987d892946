// The losses titan-run logs (metrics.jsonl: a training row per logged step with "loss", an eval
// row with "eval_loss") and their comparison with a reference run's, step by step.
#ifndef TITAN_TOOLS_GPU_PROOF_LOSSES_H_
#define TITAN_TOOLS_GPU_PROOF_LOSSES_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "tools/gpu_proof/report.h"

namespace titan::gpu_proof {

struct Metrics {
  std::map<int64_t, Json> training;  // step -> the whole training row
  std::map<int64_t, double> eval;    // step -> eval_loss
  double Loss(int64_t step) const { return training.at(step)["loss"].get<double>(); }
};

// Parses metrics.jsonl text; `source` names it in errors, which give the line and the problem.
// A torn last line (a run killed while writing) is an error like any other.
absl::StatusOr<Metrics> ParseMetrics(const std::string& text, const std::string& source);
absl::StatusOr<Metrics> ReadMetrics(const std::string& path);

struct CompareOptions {
  double tolerance = 0;    // on |got - want| / |want|; 0 asks for identical values
  int64_t after_step = 0;  // only steps after this one
  bool with_eval = false;  // the eval losses too
};

struct Comparison {
  bool pass = false;
  std::string reason;  // why not, naming the first step at fault
  double worst = 0;    // the largest relative difference among the steps compared
  Json steps;          // [{step, kind, loss, reference, relative_difference}, ...]
};

// `got` against `want`: the same steps (none missing, none extra), each within the tolerance.
// Nothing to compare is a failure, never a pass.
Comparison CompareLosses(const Metrics& got, const Metrics& want, const CompareOptions& options);

Json ToJson(const Comparison& comparison, double tolerance);

}  // namespace titan::gpu_proof

#endif  // TITAN_TOOLS_GPU_PROOF_LOSSES_H_
