// What titan-lbdc measures and how it writes it: a table on stdout, CSV, JSON, and an SVG plot
// of each policy's per-controller loads.
#ifndef TITAN_TOOLS_LBDC_REPORT_H_
#define TITAN_TOOLS_LBDC_REPORT_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "titan/status.h"

namespace titan::lbdc {

// One policy at one load snapshot (step 0: the initial assignment; step k: after change k).
struct Measurement {
  std::string policy;
  int step = 0;
  double max_load = 0.0;
  double lower_bound = 0.0;  // the best of LP*, LST's T, max w, sum w / m known at this step
  double ratio = 0.0;        // max_load / lower_bound
  // The bound on the optimum this policy proved itself (0: none). When it reaches max_load the
  // result is proven optimal; else its own gap is 1 - own_bound / max_load.
  double own_bound = 0.0;
  double stddev = 0.0;     // of the controller loads
  int64_t migrations = 0;  // moves this step made (0 at step 0)
  double runtime_ms = 0.0;
  int64_t rounds = 0;
  int64_t messages = 0;
};

bool ProvenOptimal(const Measurement& row);

struct PolicyLoads {
  std::string policy;
  std::vector<double> loads;  // per controller, at the last step
};

void PrintTable(const std::vector<Measurement>& rows, std::ostream& out);
absl::Status WriteCsv(const std::vector<Measurement>& rows, const std::string& path);
absl::Status WriteJson(const std::vector<Measurement>& rows, const std::string& path);
// Each policy's controller loads, heaviest first, as one line per policy, with the lower bound.
absl::Status WriteSvg(const std::vector<PolicyLoads>& loads, double lower_bound,
                      const std::string& path);

}  // namespace titan::lbdc

#endif  // TITAN_TOOLS_LBDC_REPORT_H_
