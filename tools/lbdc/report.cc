#include "tools/lbdc/report.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "titan/balance.h"

namespace titan::lbdc {
namespace {

absl::StatusOr<std::ofstream> Open(const std::string& path) {
  std::ofstream out(path);
  if (!out) return absl::PermissionDeniedError(absl::StrCat(path, ": cannot write"));
  return out;
}

absl::Status Close(std::ofstream& out, const std::string& path) {
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

// 1 - own bound / max load, as a percentage.
double GapPercent(const Measurement& row) {
  return row.max_load > 0 ? 100.0 * (1.0 - row.own_bound / row.max_load) : 0.0;
}

// The largest fewest-moves bound over the changes, "unreachable" when some change's target is
// proven out of reach, "-" when none was computed.
std::string MostMovesBound(const std::vector<const Measurement*>& steps) {
  int64_t most = kNotComputed;
  for (const Measurement* step : steps) {
    if (step->fewest_moves_bound == kUnreachable) return "unreachable";
    most = std::max(most, step->fewest_moves_bound);
  }
  return most == kNotComputed ? "-" : absl::StrCat(most);
}

}  // namespace

bool ProvenOptimal(const Measurement& row) {
  return titan::ProvenOptimal(row.max_load, row.own_bound);
}

void PrintTable(const std::vector<Measurement>& rows, std::ostream& out) {
  // One line per policy: its initial assignment, then what the load changes cost it.
  std::vector<std::string> order;
  std::map<std::string, std::vector<const Measurement*>> by_policy;
  for (const Measurement& row : rows) {
    if (by_policy[row.policy].empty()) order.push_back(row.policy);
    by_policy[row.policy].push_back(&row);
  }
  const bool changes = !rows.empty() && std::any_of(rows.begin(), rows.end(),
                                                    [](const auto& r) { return r.step > 0; });
  const bool bounds = std::any_of(
      rows.begin(), rows.end(), [](const auto& r) { return r.fewest_moves_bound != kNotComputed; });
  out << absl::StrFormat("%-12s %12s %12s %7s %11s %10s %8s %10s %9s", "policy", "max load",
                         "lower bound", "ratio", "stddev", "time ms", "rounds", "messages",
                         "own gap");
  if (changes) out << absl::StrFormat(" %11s %10s %11s", "moves/chg", "max moves", "worst ratio");
  if (bounds) out << absl::StrFormat(" %12s", "moves bound");
  out << "\n";
  for (const std::string& policy : order) {
    const std::vector<const Measurement*>& steps = by_policy[policy];
    const Measurement& first = *steps.front();
    out << absl::StrFormat("%-12s %12.4g %12.4g %7.4f %11.4g %10.1f %8d %10d", policy,
                           first.max_load, first.lower_bound, first.ratio, first.stddev,
                           first.runtime_ms, first.rounds, first.messages);
    // Only a policy that proves a bound of its own has a gap to show.
    if (ProvenOptimal(first)) {
      out << absl::StrFormat(" %9s", "optimal");
    } else if (first.own_bound > 0) {
      out << absl::StrFormat(" %8.3f%%", GapPercent(first));
    } else {
      out << absl::StrFormat(" %9s", "-");
    }
    if (changes) {
      double moves = 0, worst = 0;
      int64_t most = 0;
      for (const Measurement* step : steps) {
        moves += static_cast<double>(step->migrations);
        most = std::max(most, step->migrations);
        // The worst a re-balance left; the initial assignment has its own column.
        if (step->step > 0) worst = std::max(worst, step->ratio);
      }
      out << absl::StrFormat(" %11.1f %10d %11.4f", moves / std::max<size_t>(1, steps.size() - 1),
                             most, worst);
    }
    if (bounds) out << absl::StrFormat(" %12s", MostMovesBound(steps));
    out << "\n";
  }
}

absl::Status WriteCsv(const std::vector<Measurement>& rows, const std::string& path) {
  TITAN_ASSIGN_OR_RETURN(std::ofstream out, Open(path));
  out << "policy,step,max_load,lower_bound,ratio,stddev,migrations,runtime_ms,rounds,messages,"
         "own_bound,proven_optimal,target,fewest_moves_bound\n";
  for (const Measurement& r : rows) {
    out << absl::StrFormat("%s,%d,%.10g,%.10g,%.6f,%.10g,%d,%.3f,%d,%d,%.10g,%s,%.10g,%d\n",
                           r.policy, r.step, r.max_load, r.lower_bound, r.ratio, r.stddev,
                           r.migrations, r.runtime_ms, r.rounds, r.messages, r.own_bound,
                           ProvenOptimal(r) ? "true" : "false", r.target, r.fewest_moves_bound);
  }
  return Close(out, path);
}

absl::Status WriteJson(const std::vector<Measurement>& rows,
                       const std::vector<std::string>& switches,
                       const std::vector<std::string>& controllers, const std::string& path) {
  nlohmann::json measurements = nlohmann::json::array();
  for (const Measurement& r : rows) {
    measurements.push_back({{"policy", r.policy},
                            {"step", r.step},
                            {"max_load", r.max_load},
                            {"lower_bound", r.lower_bound},
                            {"ratio", r.ratio},
                            {"stddev", r.stddev},
                            {"migrations", r.migrations},
                            {"target", r.target},
                            {"fewest_moves_bound", r.fewest_moves_bound},
                            {"runtime_ms", r.runtime_ms},
                            {"rounds", r.rounds},
                            {"messages", r.messages},
                            {"own_bound", r.own_bound},
                            {"proven_optimal", ProvenOptimal(r)},
                            {"assignment", r.assignment}});
  }
  const nlohmann::json document = {
      {"switches", switches}, {"controllers", controllers}, {"measurements", measurements}};
  TITAN_ASSIGN_OR_RETURN(std::ofstream out, Open(path));
  out << document.dump(1) << "\n";
  return Close(out, path);
}

absl::Status WriteSvg(const std::vector<PolicyLoads>& loads, double lower_bound,
                      const std::string& path) {
  constexpr double kWidth = 800, kHeight = 450, kLeft = 70, kRight = 150, kTop = 30, kBottom = 50;
  const char* kColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                            "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};
  double top = lower_bound;
  size_t m = 1;
  for (const PolicyLoads& p : loads) {
    for (double w : p.loads) top = std::max(top, w);
    m = std::max(m, p.loads.size());
  }
  top = top > 0 ? top * 1.05 : 1.0;
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  auto x = [&](size_t i) { return kLeft + plot_w * (m == 1 ? 0.5 : double(i) / double(m - 1)); };
  auto y = [&](double v) { return kTop + plot_h * (1.0 - v / top); };
  TITAN_ASSIGN_OR_RETURN(std::ofstream out, Open(path));
  out << absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" "
      "fill=\"white\"/>\n<text x=\"%g\" y=\"18\">Controller loads, heaviest first</text>\n",
      kWidth, kHeight, kLeft);
  out << absl::StrFormat(
      "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"black\"/>\n<line x1=\"%g\" "
      "y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"black\"/>\n",
      kLeft, kTop, kLeft, kTop + plot_h, kLeft, kTop + plot_h, kLeft + plot_w, kTop + plot_h);
  for (int tick = 0; tick <= 4; ++tick) {
    const double v = top * tick / 4;
    out << absl::StrFormat("<text x=\"%g\" y=\"%g\" text-anchor=\"end\">%.4g</text>\n", kLeft - 5,
                           y(v) + 4, v);
  }
  out << absl::StrFormat(
      "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">controllers (%d), sorted by load</text>\n",
      kLeft + plot_w / 2, kHeight - 15, m);
  out << absl::StrFormat(
      "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"black\" stroke-dasharray=\"4\"/>"
      "\n<text x=\"%g\" y=\"%g\">lower bound</text>\n",
      kLeft, y(lower_bound), kLeft + plot_w, y(lower_bound), kLeft + plot_w + 8,
      y(lower_bound) + 4);
  for (size_t p = 0; p < loads.size(); ++p) {
    std::vector<double> sorted = loads[p].loads;
    std::sort(sorted.rbegin(), sorted.rend());
    const char* colour = kColours[p % 8];
    out << "<polyline fill=\"none\" stroke-width=\"1.5\" stroke=\"" << colour << "\" points=\"";
    for (size_t i = 0; i < sorted.size(); ++i) {
      out << absl::StrFormat("%.1f,%.1f ", x(i), y(sorted[i]));
    }
    out << "\"/>\n";
    out << absl::StrFormat("<text x=\"%g\" y=\"%g\" fill=\"%s\">%s</text>\n", kLeft + plot_w + 8,
                           kTop + 16 * (p + 1), colour, loads[p].policy);
  }
  out << "</svg>\n";
  return Close(out, path);
}

}  // namespace titan::lbdc
