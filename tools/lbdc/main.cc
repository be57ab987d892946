// titan-lbdc: builds LBDC instances, runs balance policies (loaded as plugins) on them and
// reports each policy's maximum controller load against the best lower bound. Flags are listed
// by --help and documented in docs/lbdc.md.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/runtime/closest_name.h"
#include "core/runtime/plugin_registry.h"
#include "core/topology/switch_graph.h"
#include "plugins/balance/common/lp_model.h"
#include "titan/balance.h"
#include "tools/lbdc/check.h"
#include "tools/lbdc/hotspot.h"
#include "tools/lbdc/loads.h"
#include "tools/lbdc/report.h"

namespace titan::lbdc {
namespace {

constexpr const char* kUsage = R"(usage: titan-lbdc [flags]
  --topology=SPEC        fat-tree:K | leaf-spine:LEAVES,SPINES | waxman:N[,ALPHA,BETA,DEGREE]
                         | FILE.json | FILE.toml                      (default fat-tree:8)
  --controllers=N        number of controllers                         (default 8)
  --placement=P          random | k-center | given                     (default k-center)
  --controllers-at=A,B   switch names of the controllers, for --placement=given
  --hops=H               potential controllers are those within H hops (default 2)
  --max-potential=F      keep only the F nearest potential controllers, 0: all (default 0)
  --loads=SPEC           uniform[:LO,HI] | zipf[:S] | trace:FILE.csv    (default uniform:1,100)
  --changes=K            time-varying mode: K load changes after the first assignment
  --drift=D              each change scales every load by U[1-D, 1+D]  (default 0.3)
  --hotspot=FRAC,FACTOR  from the first change, the FRAC of switches nearest a random one
                         carry FACTOR x their load, the total kept      (default none)
  --rebalance-slack=S    re-balance only above S x the best lower bound (default 1.02)
  --max-moves=N          at most N migrations per change               (default no limit)
  --fewest-moves-bound   per change, a lower bound on the migrations any assignment needs to
                         reach each policy's target (LP), or a proof that none reaches it
  --policies=A,B         balance plugins to run         (default regions,greedy,distributed,
                         lp-round,lst; add ilp for the exact optimum on small instances)
  --set=POLICY.KEY=VALUE a policy's configuration key (repeatable)
  --seed=S               random seed                                    (default 1)
  --csv=FILE --json=FILE every measurement; --svg=FILE per-controller loads of each policy
  --plugin-dir=DIR       look for plugins here first (repeatable)
  --quiet                no progress line
  --help
)";

struct Options {
  std::string topology = "fat-tree:8", placement = "k-center", loads = "uniform:1,100";
  std::vector<std::string> controllers_at,
      policies = {"regions", "greedy", "distributed", "lp-round", "lst"};
  std::vector<std::string> sets, plugin_dirs;  // sets: POLICY.KEY=VALUE
  int controllers = 8, hops = 2, max_potential = 0, changes = 0;
  double drift = 0.3, rebalance_slack = 1.02;
  std::optional<Hotspot> hotspot;
  int64_t max_moves = std::numeric_limits<int64_t>::max();
  uint64_t seed = 1;
  std::string csv, json, svg;
  bool quiet = false, help = false, fewest_moves_bound = false;
};

// Flags that would be ignored, or run a policy twice, are refused rather than dropped.
absl::Status CheckFlagsAgree(const Options& o) {
  std::set<std::string> named;
  for (const std::string& policy : o.policies) {
    if (!named.insert(policy).second) {
      return absl::InvalidArgumentError(absl::StrCat("--policies=", absl::StrJoin(o.policies, ","),
                                                     ": '", policy, "' is named twice"));
    }
  }
  for (const std::string& set : o.sets) {
    const size_t dot = set.find('.'), equals = set.find('=');
    if (dot == 0 || dot == std::string::npos || equals == std::string::npos || equals < dot + 2) {
      return absl::InvalidArgumentError(absl::StrCat("--set=", set, ": expected POLICY.KEY=VALUE"));
    }
  }
  if (!o.controllers_at.empty() && o.placement != "given") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--controllers-at places controllers only with --placement=given, not --placement=",
        o.placement));
  }
  if (o.hotspot && o.changes == 0) {
    return absl::InvalidArgumentError(
        "--hotspot heats a region from the first load change on: give --changes=K (K >= 1)");
  }
  if (o.changes > 0 && absl::StartsWith(o.loads, "trace:")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--changes=", o.changes, " draws load changes, but --loads=", o.loads,
                     " gives every step's loads (one row per step): leave --changes out"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Options> ParseFlags(int argc, char** argv) {
  Options o;
  auto integer = [](const std::string& flag, const std::string& text, int64_t low,
                    int64_t high) -> absl::StatusOr<int64_t> {
    int64_t value;
    if (!absl::SimpleAtoi(text, &value) || value < low || value > high) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, "=", text, ": expected an ", "integer in ", low, "..", high));
    }
    return value;
  };
  const std::vector<std::string> flags = {"topology",   "controllers",
                                          "placement",  "controllers-at",
                                          "hops",       "max-potential",
                                          "loads",      "changes",
                                          "drift",      "hotspot",
                                          "policies",   "set",
                                          "seed",       "csv",
                                          "json",       "svg",
                                          "plugin-dir", "quiet",
                                          "help",       "rebalance-slack",
                                          "max-moves",  "fewest-moves-bound"};
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", arg, "'; ",
                                                     "flags "
                                                     "are --name=value (see --help)"));
    }
    arg = arg.substr(2);
    const size_t equals = arg.find('=');
    const std::string name = arg.substr(0, equals);
    if (std::find(flags.begin(), flags.end(), name) == flags.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", name, "; see --help", DidYouMean(name, flags)));
    }
    if (name == "quiet" || name == "help" || name == "fewest-moves-bound") {
      (name == "quiet" ? o.quiet : name == "help" ? o.help : o.fewest_moves_bound) = true;
      continue;
    }
    std::string value;
    if (equals != std::string::npos) {
      value = arg.substr(equals + 1);
    } else if (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) {
      value = argv[++i];
    } else {  // `--topology --json=x.json` would read the next flag as the topology's file
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, " needs a value (--", name, "=VALUE)"));
    }
    auto list = [&] { return std::vector<std::string>(absl::StrSplit(value, ',')); };
    if (name == "topology") o.topology = value;
    if (name == "placement") o.placement = value;
    if (name == "loads") o.loads = value;
    if (name == "controllers-at") o.controllers_at = list();
    if (name == "policies") o.policies = list();
    if (name == "set") o.sets.push_back(value);
    if (name == "plugin-dir") o.plugin_dirs.push_back(value);
    if (name == "csv") o.csv = value;
    if (name == "json") o.json = value;
    if (name == "svg") o.svg = value;
    if (name == "controllers") {
      TITAN_ASSIGN_OR_RETURN(o.controllers, integer(name, value, 1, 10000000));
    }
    if (name == "hops") {
      TITAN_ASSIGN_OR_RETURN(o.hops, integer(name, value, 0, 1000000));
    }
    if (name == "max-potential") {
      TITAN_ASSIGN_OR_RETURN(o.max_potential, integer(name, value, 0, 1000000));
    }
    if (name == "changes") {
      TITAN_ASSIGN_OR_RETURN(o.changes, integer(name, value, 0, 1000000));
    }
    if (name == "seed") {
      TITAN_ASSIGN_OR_RETURN(o.seed, integer(name, value, 0, INT64_MAX));
    }
    if (name == "drift" &&
        (!absl::SimpleAtod(value, &o.drift) || !(o.drift >= 0 && o.drift <= 1))) {
      return absl::InvalidArgumentError(absl::StrCat("--drift=", value, ": expected 0..1"));
    }
    if (name == "hotspot") {
      TITAN_ASSIGN_OR_RETURN(o.hotspot, ParseHotspot(value));
    }
    if (name == "rebalance-slack" &&
        (!absl::SimpleAtod(value, &o.rebalance_slack) || !std::isfinite(o.rebalance_slack) ||
         o.rebalance_slack < 1.0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--rebalance-slack=", value, ": expected a finite number >= 1"));
    }
    if (name == "max-moves") {
      TITAN_ASSIGN_OR_RETURN(o.max_moves, integer(name, value, 0, INT64_MAX));
    }
  }
  TITAN_RETURN_IF_ERROR(CheckFlagsAgree(o));
  return o;
}

absl::StatusOr<ConfigValue> ParseValue(const ConfigKey& key, const std::string& text,
                                       const std::string& where) {
  auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": expected ", key.type == ConfigType::kFloat ? "a finite " : "",
                     ConfigTypeName(key.type), " (", key.help, ")"));
  };
  ConfigValue value;
  double number = 0;
  switch (key.type) {
    case ConfigType::kBool:
      if (text != "true" && text != "false") return bad();
      return ConfigValue(text == "true");
    case ConfigType::kInt: {
      int64_t integer;
      if (!absl::SimpleAtoi(text, &integer)) return bad();
      value = integer;
      number = static_cast<double>(integer);
      break;
    }
    case ConfigType::kFloat:
      if (!absl::SimpleAtod(text, &number) || !std::isfinite(number)) return bad();
      value = number;
      break;
    case ConfigType::kString:
      value = text;
      break;
    case ConfigType::kStringList:
      value = std::vector<std::string>(absl::StrSplit(text, ','));
      break;
  }
  if ((key.min && number < *key.min) || (key.max && number > *key.max)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": out of range [",
                                                   key.min.value_or(-INFINITY), ", ",
                                                   key.max.value_or(INFINITY), "]"));
  }
  if (const std::string* choice = std::get_if<std::string>(&value);
      choice && !key.choices.empty() &&
      std::find(key.choices.begin(), key.choices.end(), *choice) == key.choices.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": expected one of ", absl::StrJoin(key.choices, ", ")));
  }
  return value;
}

// A policy configured from its declared keys: their defaults, overridden by the --set flags
// naming it; unknown keys and ill-typed values are errors naming the flag.
absl::StatusOr<std::unique_ptr<BalancePlugin>> MakePolicy(const PluginRegistry& registry,
                                                          const std::string& name,
                                                          const std::vector<std::string>& sets) {
  TITAN_ASSIGN_OR_RETURN(std::unique_ptr<BalancePlugin> policy,
                         registry.Create<BalancePlugin>(name));
  const std::vector<ConfigKey> keys = policy->ConfigKeys();
  std::map<std::string, ConfigView::Entry> entries;
  std::vector<std::string> names;
  for (const ConfigKey& key : keys) {
    names.push_back(key.name);
    if (key.default_value) entries[key.name] = {*key.default_value, "default"};
  }
  for (const std::string& set : sets) {
    const size_t dot = set.find('.'), equals = set.find('=');
    if (dot == std::string::npos || equals == std::string::npos || equals < dot) {
      return absl::InvalidArgumentError(absl::StrCat("--set=", set, ": expected POLICY.KEY=VALUE"));
    }
    if (set.substr(0, dot) != name) continue;
    const std::string key_name = set.substr(dot + 1, equals - dot - 1);
    const std::string where = absl::StrCat("--set=", set);
    auto key = std::find_if(keys.begin(), keys.end(),
                            [&](const ConfigKey& k) { return k.name == key_name; });
    if (key == keys.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": policy '", name, "' has no key '", key_name, "'",
                       names.empty() ? " (it takes none)" : DidYouMean(key_name, names)));
    }
    TITAN_ASSIGN_OR_RETURN(ConfigValue value, ParseValue(*key, set.substr(equals + 1), where));
    entries[key_name] = {std::move(value), where};
  }
  TITAN_RETURN_IF_ERROR(policy->Configure(ConfigView(name, std::move(entries))));
  return policy;
}

// "[step/total] what, elapsed, ETA" on one terminal line, or a line every few seconds when
// stderr is not a terminal.
class Progress {
 public:
  Progress(int64_t total, bool quiet)
      : total_(total), quiet_(quiet), tty_(isatty(2)), start_(Clock::now()), last_(start_) {}
  void Update(int64_t done, const std::string& what) {
    if (quiet_) return;
    const auto now = Clock::now();
    const double elapsed = Seconds(start_, now);
    if (!tty_ && Seconds(last_, now) < 5.0 && done < total_) return;
    last_ = now;
    const double eta = done > 0 ? elapsed * double(total_ - done) / double(done) : 0.0;
    std::fprintf(stderr, "%s[%lld/%lld] %s, %.1f s elapsed, ETA %.1f s%s", tty_ ? "\r\033[K" : "",
                 static_cast<long long>(done), static_cast<long long>(total_), what.c_str(),
                 elapsed, eta, tty_ ? "" : "\n");
    if (tty_ && done == total_) std::fprintf(stderr, "\n");
  }

 private:
  using Clock = std::chrono::steady_clock;
  static double Seconds(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  }
  int64_t total_;
  bool quiet_, tty_;
  Clock::time_point start_, last_;
};

double Milliseconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since)
      .count();
}

std::vector<double> Loads(const BalanceProblem& problem, const std::vector<int32_t>& of) {
  std::vector<double> loads(problem.num_controllers(), 0.0);
  for (int s = 0; s < problem.num_switches(); ++s) loads[of[s]] += problem.switch_load[s];
  return loads;
}

// Of loads scaled by the largest, then scaled back: squares of loads near 1e307 would overflow
// and those near 1e-300 underflow.
double StandardDeviation(const std::vector<double>& loads) {
  const double scale = *std::max_element(loads.begin(), loads.end());
  if (!(scale > 0)) return 0.0;
  double mean = 0, squares = 0;
  for (double w : loads) mean += w / scale / loads.size();
  for (double w : loads) squares += (w / scale - mean) * (w / scale - mean) / loads.size();
  return std::sqrt(squares) * scale;
}

double TrivialBound(const BalanceProblem& problem) {
  double largest = 0, total = 0;
  for (double w : problem.switch_load) largest = std::max(largest, w), total += w;
  return std::max(largest, total / problem.num_controllers());
}

absl::Status Prefixed(const std::string& policy, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(policy, ": ", status.message()));
}

absl::Status Run(const Options& o) {
  std::mt19937_64 random(o.seed);
  TITAN_ASSIGN_OR_RETURN(topology::Topology topology, topology::MakeTopology(o.topology, random));
  TITAN_ASSIGN_OR_RETURN(
      std::vector<int32_t> sites,
      topology::PlaceControllers(topology, o.placement, o.controllers, o.controllers_at, random));
  TITAN_ASSIGN_OR_RETURN(BalanceProblem problem,
                         topology::PotentialControllers(topology, sites, o.hops, o.max_potential));
  TITAN_ASSIGN_OR_RETURN(std::vector<std::vector<double>> snapshots,
                         MakeLoads(o.loads, topology.size(), o.changes, o.drift, random));
  if (o.hotspot) {
    const std::vector<int32_t> region = HotRegion(topology, o.hotspot->fraction, random);
    TITAN_RETURN_IF_ERROR(HeatRegion(region, o.hotspot->factor, snapshots));
    std::cerr << "hotspot: " << region.size() << " switches around '" << topology.name[region[0]]
              << "' carry " << o.hotspot->factor << " x their load from change 1 on\n";
  }
  size_t f = 0;
  for (const auto& p : problem.potential) f = std::max(f, p.size());
  std::cerr << "instance: " << topology.size() << " switches, " << sites.size()
            << " controllers, f = " << f << ", " << snapshots.size() - 1 << " load change(s)\n";

  std::vector<std::filesystem::path> dirs;
  const char* env = std::getenv("TITAN_PLUGIN_PATH");
  TITAN_ASSIGN_OR_RETURN(dirs, PluginSearchDirs(o.plugin_dirs, env ? env : "",
                                                std::filesystem::read_symlink("/proc/self/exe")));
  TITAN_ASSIGN_OR_RETURN(std::unique_ptr<PluginRegistry> registry, PluginRegistry::Discover(dirs));
  for (const RejectedPlugin& rejected : registry->rejected()) {
    std::fprintf(stderr, "%s: warning: skipping plugin file %s\n", "titan-lbdc",
                 rejected.reason.c_str());
  }
  // A --set for a policy that is not run would silently do nothing.
  for (const std::string& set : o.sets) {
    const std::string policy = set.substr(0, set.find('.'));
    if (std::find(o.policies.begin(), o.policies.end(), policy) == o.policies.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--set=", set, ": policy '", policy, "' is not run (--policies=",
                       absl::StrJoin(o.policies, ","), ")", DidYouMean(policy, o.policies)));
    }
  }
  std::vector<std::unique_ptr<BalancePlugin>> policies;
  for (const std::string& name : o.policies) {
    TITAN_ASSIGN_OR_RETURN(std::unique_ptr<BalancePlugin> policy,
                           MakePolicy(*registry, name, o.sets));
    policies.push_back(std::move(policy));
  }

  // Lower bounds per step: the trivial one, raised by what the policies prove.
  std::vector<double> bound(snapshots.size());
  std::vector<Measurement> rows;
  std::vector<PolicyLoads> final_loads;
  Progress progress(static_cast<int64_t>(policies.size() * snapshots.size()), o.quiet);
  int64_t done = 0;
  const RebalanceGoal goal{o.rebalance_slack, 0.0, o.max_moves};
  for (size_t p = 0; p < policies.size(); ++p) {
    const std::string& name = o.policies[p];
    std::vector<int32_t> current;
    for (size_t step = 0; step < snapshots.size(); ++step) {
      problem.switch_load = snapshots[step];
      bound[step] = std::max(bound[step], TrivialBound(problem));
      Measurement row;
      row.policy = name;
      row.step = static_cast<int>(step);
      const auto start = std::chrono::steady_clock::now();
      if (step == 0) {
        absl::StatusOr<BalanceResult> result =
            CallPluginOf(*policies[p], "Assign", [&] { return policies[p]->Assign(problem); });
        if (!result.ok()) return Prefixed(name, result.status());
        row.runtime_ms = Milliseconds(start);
        current = result->controller_of;
        row.rounds = result->rounds;
        row.messages = result->messages;
        row.own_bound = result->lower_bound;
      } else {
        absl::StatusOr<RebalanceResult> result = CallPluginOf(*policies[p], "Rebalance", [&] {
          return policies[p]->Rebalance(problem, current, goal);
        });
        if (!result.ok()) return Prefixed(name, result.status());
        row.runtime_ms = Milliseconds(start);
        const std::vector<int32_t> before = current;
        TITAN_RETURN_IF_ERROR(Prefixed(name, ApplyMoves(result->moves, topology, current)));
        row.migrations = MigratedSwitches(before, current);
        row.own_bound = result->lower_bound;
        row.target = result->target;
        if (o.fewest_moves_bound && row.target > 0) {
          absl::StatusOr<balance::FewestMovesBound> fewest =
              balance::BoundFewestMoves(problem, before, row.target, /*log_level=*/0);
          if (!fewest.ok()) return Prefixed(name, fewest.status());
          row.fewest_moves_bound = fewest->reachable ? fewest->moves : kUnreachable;
        }
      }
      // A policy is a plugin: its answer is checked, not trusted.
      TITAN_RETURN_IF_ERROR(Prefixed(absl::StrCat(name, ": step ", step),
                                     CheckAssignment(problem, current, topology, sites)));
      if (!std::isfinite(row.own_bound)) {
        return absl::InternalError(absl::StrCat(name, ": step ", step, ": lower bound ",
                                                row.own_bound, " is not a finite number"));
      }
      bound[step] = std::max(bound[step], row.own_bound);
      const std::vector<double> loads = Loads(problem, current);
      row.max_load = *std::max_element(loads.begin(), loads.end());
      row.stddev = StandardDeviation(loads);
      if (!o.json.empty()) row.assignment = current;
      rows.push_back(std::move(row));
      if (step + 1 == snapshots.size()) final_loads.push_back({name, loads});
      progress.Update(++done, absl::StrCat(name, " step ", step));
    }
  }
  for (Measurement& row : rows) {
    row.lower_bound = bound[row.step];
    row.ratio = row.lower_bound > 0 ? row.max_load / row.lower_bound : 1.0;
  }
  PrintTable(rows, std::cout);
  if (!o.csv.empty()) TITAN_RETURN_IF_ERROR(WriteCsv(rows, o.csv));
  if (!o.json.empty()) {
    std::vector<std::string> controllers;
    for (int32_t site : sites) controllers.push_back(topology.name[site]);
    TITAN_RETURN_IF_ERROR(WriteJson(rows, topology.name, controllers, o.json));
  }
  if (!o.svg.empty()) TITAN_RETURN_IF_ERROR(WriteSvg(final_loads, bound.back(), o.svg));
  return absl::OkStatus();
}

}  // namespace
}  // namespace titan::lbdc

int main(int argc, char** argv) {
  absl::StatusOr<titan::lbdc::Options> options = titan::lbdc::ParseFlags(argc, argv);
  if (!options.ok()) {
    std::cerr << "titan-lbdc: " << options.status().message() << "\n";
    return 2;
  }
  if (options->help) {
    std::cout << titan::lbdc::kUsage;
    return 0;
  }
  absl::Status status = titan::lbdc::Run(*options);
  if (!status.ok()) {
    std::cerr << "titan-lbdc: " << status.message() << "\n";
    return 1;
  }
  return 0;
}
