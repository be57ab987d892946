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

inline constexpr int64_t kNotComputed = -1;
inline constexpr int64_t kUnreachable = -2;

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
  double target = 0.0;  // the max load a re-balance aimed for (0 at step 0)
  // With --fewest-moves-bound: a lower bound on the migrations any assignment needs, from the
  // assignment before this change, to bring every controller within `target`; kUnreachable
  // when no assignment does (proven); kNotComputed otherwise.
  int64_t fewest_moves_bound = kNotComputed;
  std::vector<int32_t> assignment;  // controller per switch after this step, for --json
};

// Within kOptimalityTolerance (titan/balance.h) of the policy's own bound.
bool ProvenOptimal(const Measurement& row);

struct PolicyLoads {
  std::string policy;
  std::vector<double> loads;  // per controller, at the last step
};

void PrintTable(const std::vector<Measurement>& rows, std::ostream& out);
absl::Status WriteCsv(const std::vector<Measurement>& rows, const std::string& path);
// {"switches": [names], "controllers": [names of their sites], "measurements": [rows, each with
// its assignment as controller indices]}; a number that is not finite is written as null.
absl::Status WriteJson(const std::vector<Measurement>& rows,
                       const std::vector<std::string>& switches,
                       const std::vector<std::string>& controllers, const std::string& path);
// Each policy's controller loads, heaviest first, as one line per policy, with the lower bound.
absl::Status WriteSvg(const std::vector<PolicyLoads>& loads, double lower_bound,
                      const std::string& path);

}  // namespace titan::lbdc

#endif  // TITAN_TOOLS_LBDC_REPORT_H_
