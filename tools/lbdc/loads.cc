#include "tools/lbdc/loads.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace titan::lbdc {
namespace {

// Whether the loads, and so every controller's load, add up to a finite number.
bool FiniteSum(const std::vector<double>& loads) {
  double total = 0.0;
  for (double w : loads) total += w;
  return std::isfinite(total);
}

absl::StatusOr<std::vector<std::vector<double>>> ReadTrace(const std::string& path, int n) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open the load trace"));
  std::vector<std::vector<double>> snapshots;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty() || text[0] == '#') continue;
    std::vector<double> loads;
    for (absl::string_view field : absl::StrSplit(text, ',')) {
      double value;
      if (!absl::SimpleAtod(field, &value) || !std::isfinite(value) || value < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ":", number, ": '", field, "' is not a flow count (a number >= 0)"));
      }
      loads.push_back(value);
    }
    if (static_cast<int>(loads.size()) != n) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", number, ": ", loads.size(),
                                                     " values; expected one per switch (", n, ")"));
    }
    if (!FiniteSum(loads)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", number,
                       ": the flow counts sum beyond the largest double; expected a finite sum"));
    }
    snapshots.push_back(std::move(loads));
  }
  if (snapshots.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no loads"));
  return snapshots;
}

absl::StatusOr<std::vector<double>> Parameters(absl::string_view spec, size_t prefix,
                                               std::vector<double> defaults) {
  if (spec.size() <= prefix) return defaults;
  std::vector<std::string> parts = absl::StrSplit(spec.substr(prefix + 1), ',');
  if (parts.size() != defaults.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--loads=", spec, ": expected ", defaults.size(), " parameter(s)"));
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!absl::SimpleAtod(parts[i], &defaults[i]) || !std::isfinite(defaults[i]) ||
        defaults[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--loads=", spec, ": '", parts[i], "' is not a finite number >= 0"));
    }
  }
  return defaults;
}

}  // namespace

absl::StatusOr<std::vector<std::vector<double>>> MakeLoads(const std::string& spec,
                                                           int num_switches, int changes,
                                                           double drift, std::mt19937_64& random) {
  if (absl::StartsWith(spec, "trace:")) return ReadTrace(spec.substr(6), num_switches);
  // Every step's loads are kept: bounded before they are drawn, not by a failed allocation.
  const double bytes = (changes + 1.0) * num_switches * sizeof(double);
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0 && bytes > static_cast<double>(pages) * page / 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("--changes=", changes, ": ", changes + 1, " load vectors of ", num_switches,
                     " switches take ", bytes, " bytes, more than half of this machine's memory (",
                     static_cast<double>(pages) * page, " bytes): ask for fewer changes"));
  }
  std::vector<double> first(num_switches);
  if (absl::StartsWith(spec, "uniform") && (spec.size() == 7 || spec[7] == ':')) {
    TITAN_ASSIGN_OR_RETURN(std::vector<double> p, Parameters(spec, 7, {1.0, 100.0}));
    if (p[0] > p[1]) return absl::InvalidArgumentError(absl::StrCat("--loads=", spec, ": LO > HI"));
    std::uniform_real_distribution<double> draw(p[0], p[1]);
    for (double& w : first) w = draw(random);
  } else if (absl::StartsWith(spec, "zipf") && (spec.size() == 4 || spec[4] == ':')) {
    // Flow counts by popularity rank: the r-th busiest switch carries 1000 / r^S.
    TITAN_ASSIGN_OR_RETURN(std::vector<double> p, Parameters(spec, 4, {1.0}));
    std::vector<int> rank(num_switches);
    std::iota(rank.begin(), rank.end(), 1);
    std::shuffle(rank.begin(), rank.end(), random);
    for (int s = 0; s < num_switches; ++s) first[s] = 1000.0 / std::pow(rank[s], p[0]);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--loads=", spec, ": expected uniform[:LO,HI], zipf[:S] or trace:PATH"));
  }
  std::vector<std::vector<double>> snapshots = {first};
  std::uniform_real_distribution<double> factor(std::max(0.0, 1.0 - drift), 1.0 + drift);
  for (int change = 0; change < changes; ++change) {
    std::vector<double> next = snapshots.back();
    for (double& w : next) w *= factor(random);
    snapshots.push_back(std::move(next));
  }
  for (size_t step = 0; step < snapshots.size(); ++step) {
    if (!FiniteSum(snapshots[step])) {
      return absl::InvalidArgumentError(
          absl::StrCat("--loads=", spec, ": the loads ",
                       step == 0 ? "drawn" : absl::StrCat("after change ", step),
                       " sum beyond the largest double; expected a finite sum"));
    }
  }
  return snapshots;
}

}  // namespace titan::lbdc
