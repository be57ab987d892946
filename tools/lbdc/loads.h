// Per-switch loads for titan-lbdc: drawn (uniform, Zipf) or read from a trace of per-switch
// flow counts, as a sequence of snapshots for the time-varying mode.
#ifndef TITAN_TOOLS_LBDC_LOADS_H_
#define TITAN_TOOLS_LBDC_LOADS_H_

#include <random>
#include <string>
#include <vector>

#include "titan/status.h"

namespace titan::lbdc {

// "uniform[:LO,HI]", "zipf[:S]" or "trace:PATH". Drawn loads give 1 + `changes` snapshots, each
// after the first the previous one with every load scaled by a uniform factor in
// [1 - drift, 1 + drift]; a trace gives its lines (CSV, one value per switch), `changes`
// ignored.
absl::StatusOr<std::vector<std::vector<double>>> MakeLoads(const std::string& spec,
                                                           int num_switches, int changes,
                                                           double drift, std::mt19937_64& random);

}  // namespace titan::lbdc

#endif  // TITAN_TOOLS_LBDC_LOADS_H_
