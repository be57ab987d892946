#include "core/topology/switch_graph.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/data/input_file.h"
#include "core/runtime/closest_name.h"

namespace titan::topology {
namespace {

constexpr double kMaxSwitches = 1e7;
constexpr double kMaxLinks = 5e7;
constexpr double kMaxWaxmanPairs = 5e8;  // a few seconds of drawing

// A topology as a file describes it, before names become indices.
struct Described {
  std::vector<std::string> switches;
  std::vector<std::pair<std::string, std::string>> links;
  std::vector<std::string> controllers;
};

void Link(Topology& topology, int a, int b) {
  topology.links[a].push_back(b);
  topology.links[b].push_back(a);
}

int AddSwitch(Topology& topology, std::string name) {
  topology.name.push_back(std::move(name));
  topology.links.emplace_back();
  return topology.size() - 1;
}

Topology FatTree(int k) {
  Topology t;
  const int half = k / 2;
  std::vector<int> core;
  for (int i = 0; i < half * half; ++i) core.push_back(AddSwitch(t, absl::StrCat("core-", i)));
  for (int pod = 0; pod < k; ++pod) {
    std::vector<int> aggregation;
    for (int j = 0; j < half; ++j) {
      aggregation.push_back(AddSwitch(t, absl::StrCat("agg-", pod, "-", j)));
      for (int i = 0; i < half; ++i) Link(t, aggregation.back(), core[j * half + i]);
    }
    for (int i = 0; i < half; ++i) {
      const int edge = AddSwitch(t, absl::StrCat("edge-", pod, "-", i));
      for (int agg : aggregation) Link(t, edge, agg);
    }
  }
  return t;
}

Topology LeafSpine(int leaves, int spines) {
  Topology t;
  for (int i = 0; i < spines; ++i) AddSwitch(t, absl::StrCat("spine-", i));
  for (int i = 0; i < leaves; ++i) {
    const int leaf = AddSwitch(t, absl::StrCat("leaf-", i));
    for (int j = 0; j < spines; ++j) Link(t, leaf, j);
  }
  return t;
}

int Find(std::vector<int>& parent, int a) {
  while (parent[a] != a) a = parent[a] = parent[parent[a]];
  return a;
}

// Waxman's model on the unit square, limited to pairs closer than a radius R chosen for the
// requested mean degree, so that large graphs stay sparse and build in O(N): a pair at distance
// d < R is linked with probability beta * exp(-d / (alpha R)). Components are then joined by a
// link between switches adjacent in x order, so every switch reaches some controller.
// The radius within which Waxman links switches, chosen so that the mean degree is about
// `degree` (capped at 1.5, the unit square's diagonal and a little).
double WaxmanRadius(double n, double alpha, double beta, double degree) {
  const double shape = alpha * alpha * (1.0 - std::exp(-1.0 / alpha) * (1.0 + 1.0 / alpha));
  return std::min(1.5, std::sqrt(degree / (2.0 * M_PI * n * beta * shape)));
}

// The pairs of switches Waxman considers: each switch against those of its own and the 8
// neighbouring grid cells of side `radius`.
double WaxmanPairs(double n, double radius) {
  const double cells = std::max(1.0, std::floor(1.0 / radius));
  return n * n / 2 * std::min(1.0, 9.0 / (cells * cells));
}

Topology Waxman(int n, double alpha, double beta, double degree, std::mt19937_64& random) {
  Topology t;
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<double> x(n), y(n);
  for (int i = 0; i < n; ++i) {
    x[i] = unit(random);
    y[i] = unit(random);
    AddSwitch(t, absl::StrCat("s", i));
  }
  const double radius = WaxmanRadius(n, alpha, beta, degree);
  const int cells = std::max(1, static_cast<int>(1.0 / radius));
  std::vector<std::vector<int>> grid(static_cast<size_t>(cells) * cells);
  auto cell = [&](double v) { return std::min(cells - 1, static_cast<int>(v * cells)); };
  for (int i = 0; i < n; ++i) grid[cell(x[i]) * cells + cell(y[i])].push_back(i);
  for (int i = 0; i < n; ++i) {
    const int cx = cell(x[i]), cy = cell(y[i]);
    for (int gx = std::max(0, cx - 1); gx <= std::min(cells - 1, cx + 1); ++gx) {
      for (int gy = std::max(0, cy - 1); gy <= std::min(cells - 1, cy + 1); ++gy) {
        for (int j : grid[gx * cells + gy]) {
          if (j <= i) continue;
          const double d = std::hypot(x[i] - x[j], y[i] - y[j]);
          if (d < radius && unit(random) < beta * std::exp(-d / (alpha * radius))) Link(t, i, j);
        }
      }
    }
  }
  std::vector<int> parent(n), order(n);
  std::iota(parent.begin(), parent.end(), 0);
  std::iota(order.begin(), order.end(), 0);
  for (int i = 0; i < n; ++i) {
    for (int j : t.links[i]) parent[Find(parent, i)] = Find(parent, j);
  }
  std::sort(order.begin(), order.end(), [&](int a, int b) { return x[a] < x[b]; });
  for (int i = 1; i < n; ++i) {
    const int a = Find(parent, order[i - 1]), b = Find(parent, order[i]);
    if (a == b) continue;
    Link(t, order[i - 1], order[i]);
    parent[a] = b;
  }
  return t;
}

// A key a topology file may hold; another (a misspelt "link") would be ignored.
absl::Status KnownKey(const std::string& path, absl::string_view key) {
  static const std::vector<std::string> kKeys = {"switches", "controllers", "links"};
  if (std::find(kKeys.begin(), kKeys.end(), key) != kKeys.end()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(path, ": unknown key '", key,
                                                 "'; a topology holds switches, links and "
                                                 "controllers",
                                                 DidYouMean(std::string(key), kKeys)));
}

absl::StatusOr<Described> ReadJson(const std::string& path, const std::string& text) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& error) {
    // Name the place as line:column, as the TOML reader does.
    return absl::InvalidArgumentError(absl::StrCat(
        path, ":", LineColumn(text, error.byte > 0 ? error.byte - 1 : 0), ": not valid JSON"));
  } catch (const nlohmann::json::exception& error) {  // a number too large for a double
    return absl::InvalidArgumentError(absl::StrCat(path, ": not valid JSON: ", error.what()));
  }
  if (!json.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": expected a JSON object"));
  }
  for (const auto& [key, value] : json.items()) TITAN_RETURN_IF_ERROR(KnownKey(path, key));
  Described d;
  auto strings = [&](const char* key, std::vector<std::string>& out) -> absl::Status {
    if (!json.contains(key)) return absl::OkStatus();
    const nlohmann::json& list = json[key];
    for (size_t i = 0; list.is_array() && i < list.size(); ++i) {
      if (!list[i].is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": ", key, "[", i, "]: expected a switch name (a string)"));
      }
      out.push_back(list[i].get<std::string>());
    }
    if (!list.is_array()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", key, ": expected an array"));
    }
    return absl::OkStatus();
  };
  TITAN_RETURN_IF_ERROR(strings("switches", d.switches));
  TITAN_RETURN_IF_ERROR(strings("controllers", d.controllers));
  const nlohmann::json& links = json.contains("links") ? json["links"] : nlohmann::json::array();
  if (!links.is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": links: expected an array"));
  }
  for (size_t i = 0; i < links.size(); ++i) {
    const nlohmann::json& link = links[i];
    if (!link.is_array() || link.size() != 2 || !link[0].is_string() || !link[1].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": links[", i, "]: expected a pair of switch names"));
    }
    d.links.emplace_back(link[0].get<std::string>(), link[1].get<std::string>());
  }
  return d;
}

absl::StatusOr<Described> ReadToml(const std::string& path, const std::string& text) {
  toml::table table;
  try {
    table = toml::parse(text, path);
  } catch (const toml::parse_error& error) {
    return absl::InvalidArgumentError(absl::StrCat(path, ":", error.source().begin.line, ":",
                                                   error.source().begin.column, ": ",
                                                   std::string(error.description())));
  }
  for (const auto& [key, value] : table)
    TITAN_RETURN_IF_ERROR(KnownKey(path, std::string(key.str())));
  Described d;
  auto strings = [&](const char* key, std::vector<std::string>& out) -> absl::Status {
    const toml::node* node = table.get(key);
    if (node == nullptr) return absl::OkStatus();
    const toml::array* list = node->as_array();
    if (list == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", key, ": expected an array"));
    }
    for (size_t i = 0; i < list->size(); ++i) {
      std::optional<std::string> name = (*list)[i].value<std::string>();
      if (!name) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": ", key, "[", i, "]: expected a switch name (a string)"));
      }
      out.push_back(*name);
    }
    return absl::OkStatus();
  };
  TITAN_RETURN_IF_ERROR(strings("switches", d.switches));
  TITAN_RETURN_IF_ERROR(strings("controllers", d.controllers));
  if (table.contains("links") && !table["links"].is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": links: expected an array"));
  }
  if (const toml::array* links = table["links"].as_array()) {
    for (size_t i = 0; i < links->size(); ++i) {
      const toml::array* link = (*links)[i].as_array();
      std::optional<std::string> a, b;
      if (link != nullptr && link->size() == 2) {
        a = (*link)[0].value<std::string>();
        b = (*link)[1].value<std::string>();
      }
      if (!a || !b) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": links[", i, "]: expected a pair of switch names"));
      }
      d.links.emplace_back(*a, *b);
    }
  }
  return d;
}

absl::StatusOr<Topology> ReadTopologyFile(const std::string& path) {
  std::error_code error;
  if (std::filesystem::exists(path, error) && !std::filesystem::is_regular_file(path, error)) {
    // A folder reads as empty text, which would be reported as "not valid JSON".
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a file (a folder?): expected a topology file"));
  }
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open the topology file"));
  std::stringstream text;
  text << in.rdbuf();
  const bool json = absl::EndsWith(path, ".json");
  TITAN_ASSIGN_OR_RETURN(Described d,
                         json ? ReadJson(path, text.str()) : ReadToml(path, text.str()));
  if (d.switches.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": 'switches' lists no switch"));
  }
  Topology t;
  std::map<std::string, int> index;
  for (const std::string& name : d.switches) {
    if (!index.emplace(name, t.size()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": switch '", name, "' is listed twice"));
    }
    AddSwitch(t, name);
  }
  for (size_t i = 0; i < d.links.size(); ++i) {
    int ends[2];
    for (int e = 0; e < 2; ++e) {
      const std::string& name = e == 0 ? d.links[i].first : d.links[i].second;
      auto it = index.find(name);
      if (it == index.end()) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": links[", i, "] names switch '",
                                                       name, "', which 'switches' does not list",
                                                       DidYouMean(name, d.switches)));
      }
      ends[e] = it->second;
    }
    if (ends[0] != ends[1]) Link(t, ends[0], ends[1]);
  }
  t.controllers_at = d.controllers;
  return t;
}

absl::StatusOr<std::vector<double>> Numbers(absl::string_view text, absl::string_view spec) {
  std::vector<double> numbers;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    double value;
    if (!absl::SimpleAtod(part, &value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--topology=", spec, ": '", part, "' is not a number"));
    }
    numbers.push_back(value);
  }
  return numbers;
}

// Hop distances from `source`, up to `limit` hops (-1 beyond).
void Bfs(const Topology& t, int source, int limit, std::vector<int>& distance,
         std::vector<int32_t>& reached) {
  reached.clear();
  distance[source] = 0;
  reached.push_back(source);
  for (size_t head = 0; head < reached.size(); ++head) {
    const int u = reached[head];
    if (distance[u] == limit) continue;
    for (int v : t.links[u]) {
      if (distance[v] >= 0) continue;
      distance[v] = distance[u] + 1;
      reached.push_back(v);
    }
  }
}

}  // namespace

absl::StatusOr<Topology> MakeTopology(const std::string& spec, std::mt19937_64& random) {
  if (absl::EndsWith(spec, ".json") || absl::EndsWith(spec, ".toml")) {
    return ReadTopologyFile(spec);
  }
  const size_t colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  const std::vector<std::string> kinds = {"fat-tree", "leaf-spine", "waxman"};
  if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end() || colon == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--topology=", spec,
                     ": expected fat-tree:K, leaf-spine:LEAVES,SPINES, "
                     "waxman:N[,ALPHA,BETA,DEGREE] or a .json/.toml file",
                     DidYouMean(kind, kinds)));
  }
  TITAN_ASSIGN_OR_RETURN(std::vector<double> p, Numbers(spec.substr(colon + 1), spec));
  auto bad = [&](const std::string& expected) {
    return absl::InvalidArgumentError(absl::StrCat("--topology=", spec, ": expected ", expected));
  };
  // Sizes are checked before anything is built: a generator asked for 10^10 links would
  // exhaust memory long before it failed.
  auto whole = [](double v, double low, double high) {
    return std::isfinite(v) && v == std::floor(v) && v >= low && v <= high;
  };
  auto too_many_links = [&](double links) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--topology=", spec, ": ", links, " links; at most ", kMaxLinks, " are supported"));
  };
  if (kind == "fat-tree") {
    if (p.size() != 1 || !whole(p[0], 2, 512) || std::fmod(p[0], 2.0) != 0.0) {
      return bad("fat-tree:K with K even, 2..512");
    }
    if (p[0] * p[0] * p[0] / 2 > kMaxLinks) return too_many_links(p[0] * p[0] * p[0] / 2);
    return FatTree(static_cast<int>(p[0]));
  }
  if (kind == "leaf-spine") {
    if (p.size() != 2 || !whole(p[0], 1, kMaxSwitches) || !whole(p[1], 1, kMaxSwitches) ||
        p[0] + p[1] > kMaxSwitches) {
      return bad(absl::StrCat("leaf-spine:LEAVES,SPINES, whole numbers >= 1, at most ",
                              kMaxSwitches, " switches in all"));
    }
    if (p[0] * p[1] > kMaxLinks) return too_many_links(p[0] * p[1]);
    return LeafSpine(static_cast<int>(p[0]), static_cast<int>(p[1]));
  }
  if (p.size() > 4 || !whole(p[0], 1, kMaxSwitches)) {
    return bad(
        absl::StrCat("waxman:N[,ALPHA,BETA,DEGREE] with N a whole number, 1..", kMaxSwitches));
  }
  // Parameters left out take their defaults; those given must make sense.
  const double alpha = p.size() > 1 ? p[1] : 0.4, beta = p.size() > 2 ? p[2] : 0.6;
  const double degree = p.size() > 3 ? p[3] : 4.0;
  // Beyond 1000, ALPHA no longer changes the graph (every link within the radius is taken with
  // probability BETA), and the radius's formula loses all precision.
  if (!(alpha > 0 && alpha <= 1000)) return bad("0 < ALPHA <= 1000");
  if (!(beta > 0 && beta <= 1)) return bad("0 < BETA <= 1");
  if (!(degree > 0 && degree * p[0] / 2 <= kMaxLinks)) {
    return bad(absl::StrCat("DEGREE > 0, with N x DEGREE / 2 at most ", kMaxLinks, " links"));
  }
  // A small ALPHA widens the radius the mean degree needs, and with it the pairs to consider.
  const double radius = WaxmanRadius(p[0], alpha, beta, degree);
  if (const double pairs = WaxmanPairs(p[0], radius); pairs > kMaxWaxmanPairs) {
    return absl::InvalidArgumentError(
        absl::StrCat("--topology=", spec, ": links within a radius of ", radius,
                     " (for a mean degree of ", degree, " at ALPHA ", alpha, " and BETA ", beta,
                     ") make ", pairs, " pairs of switches to consider; at most ", kMaxWaxmanPairs,
                     " are supported: raise ALPHA or BETA, or lower DEGREE"));
  }
  return Waxman(static_cast<int>(p[0]), alpha, beta, degree, random);
}

absl::StatusOr<std::vector<int32_t>> PlaceControllers(const Topology& topology,
                                                      const std::string& placement, int count,
                                                      const std::vector<std::string>& names,
                                                      std::mt19937_64& random) {
  const int n = topology.size();
  if (placement == "given") {
    const std::vector<std::string>& given = names.empty() ? topology.controllers_at : names;
    if (given.empty()) {
      return absl::InvalidArgumentError(
          "--placement=given needs --controllers-at or a topology file with 'controllers'");
    }
    std::map<std::string, int32_t> index;
    for (int s = 0; s < n; ++s) index.emplace(topology.name[s], s);
    std::vector<int32_t> sites;
    std::set<std::string> seen;
    for (const std::string& name : given) {
      if (!seen.insert(name).second) {
        return absl::InvalidArgumentError(absl::StrCat(
            "controller site '", name, "' is listed twice; expected one controller per switch"));
      }
      auto it = index.find(name);
      if (it == index.end()) {
        return absl::InvalidArgumentError(absl::StrCat("controller site '", name,
                                                       "' is not a switch of the topology",
                                                       DidYouMean(name, topology.name)));
      }
      sites.push_back(it->second);
    }
    return sites;
  }
  if (count < 1 || count > n) {
    return absl::InvalidArgumentError(absl::StrCat("--controllers=", count, ": expected 1..", n,
                                                   " (the topology has ", n, " switches)"));
  }
  if (placement == "random") {
    std::vector<int32_t> all(n);
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), random);
    all.resize(count);
    std::sort(all.begin(), all.end());
    return all;
  }
  if (placement != "k-center") {
    return absl::InvalidArgumentError(
        absl::StrCat("--placement=", placement, ": expected random, k-center or given",
                     DidYouMean(placement, {"random", "k-center", "given"})));
  }
  // Farthest-first traversal: each new site is the switch farthest (in hops) from the chosen
  // ones, a 2-approximation of the k-center problem.
  std::vector<int> nearest(n, std::numeric_limits<int>::max());
  std::vector<int32_t> sites = {static_cast<int32_t>(random() % n)};
  std::vector<int32_t> queue;
  while (true) {
    // Hops to the new site, visiting only switches it brings closer.
    queue.assign(1, sites.back());
    nearest[sites.back()] = 0;
    for (size_t head = 0; head < queue.size(); ++head) {
      const int u = queue[head];
      for (int v : topology.links[u]) {
        if (nearest[u] + 1 >= nearest[v]) continue;
        nearest[v] = nearest[u] + 1;
        queue.push_back(v);
      }
    }
    if (static_cast<int>(sites.size()) == count) break;
    sites.push_back(
        static_cast<int32_t>(std::max_element(nearest.begin(), nearest.end()) - nearest.begin()));
  }
  std::sort(sites.begin(), sites.end());
  return sites;
}

absl::StatusOr<BalanceProblem> PotentialControllers(const Topology& topology,
                                                    const std::vector<int32_t>& sites, int hops,
                                                    int max_potential) {
  const int n = topology.size();
  std::vector<std::vector<std::pair<int, int32_t>>> within(n);  // (hops, controller)
  std::vector<int> distance(n, -1);
  std::vector<int32_t> reached;
  for (int32_t c = 0; c < static_cast<int32_t>(sites.size()); ++c) {
    Bfs(topology, sites[c], hops, distance, reached);
    for (int32_t s : reached) {
      within[s].emplace_back(distance[s], c);
      distance[s] = -1;
    }
  }
  BalanceProblem problem;
  problem.controller_capacity.assign(sites.size(), std::numeric_limits<double>::infinity());
  problem.switch_load.assign(n, 0.0);
  problem.potential.resize(n);
  problem.distance.resize(n);
  for (int s = 0; s < n; ++s) {
    std::vector<std::pair<int, int32_t>>& list = within[s];
    if (list.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("switch '", topology.name[s],
                                                     "' has no controller within ", hops,
                                                     " hops; raise --hops or add controllers"));
    }
    std::sort(list.begin(), list.end());
    if (max_potential > 0 && static_cast<int>(list.size()) > max_potential) {
      list.resize(max_potential);
    }
    for (const auto& [d, c] : list) {
      problem.potential[s].push_back(c);
      problem.distance[s].push_back(d);
    }
  }
  return problem;
}

}  // namespace titan::topology
