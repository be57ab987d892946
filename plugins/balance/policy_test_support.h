// What the balance policies' tests share: the plugins from the build tree, configured, and small
// random instances.
#ifndef TITAN_PLUGINS_BALANCE_POLICY_TEST_SUPPORT_H_
#define TITAN_PLUGINS_BALANCE_POLICY_TEST_SUPPORT_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>

#include "core/runtime/plugin_registry.h"
#include "titan/balance.h"

namespace titan::balance {

inline PluginRegistry& Registry() {
  static PluginRegistry* registry =
      PluginRegistry::Discover({TITAN_BUILD_PLUGIN_DIR}).value().release();
  return *registry;
}

// The plugin configured with its defaults, with `overrides` on top.
inline std::unique_ptr<BalancePlugin> Make(
    const std::string& name, const std::map<std::string, ConfigValue>& overrides = {}) {
  auto plugin = Registry().Create<BalancePlugin>(name);
  EXPECT_TRUE(plugin.ok()) << plugin.status();
  std::map<std::string, ConfigView::Entry> entries;
  for (const ConfigKey& key : (*plugin)->ConfigKeys()) {
    entries[key.name] = {*key.default_value, "default"};
  }
  for (const auto& [key, value] : overrides) entries[key] = {value, "test"};
  EXPECT_TRUE((*plugin)->Configure(ConfigView("control_plane", entries)).ok());
  return std::move(*plugin);
}

// Up to 7 controllers and 24 switches, each with up to 4 potential controllers; integer or
// real loads.
inline BalanceProblem RandomProblem(std::mt19937& random) {
  const int m = std::uniform_int_distribution<int>(1, 7)(random);
  const int n = std::uniform_int_distribution<int>(1, 24)(random);
  const int max_f = std::uniform_int_distribution<int>(1, std::min(m, 4))(random);
  const bool integers = random() % 2 == 0;
  BalanceProblem problem;
  problem.controller_capacity.assign(m, std::numeric_limits<double>::infinity());
  std::vector<int32_t> controllers(m);
  std::iota(controllers.begin(), controllers.end(), 0);
  for (int s = 0; s < n; ++s) {
    double w = integers ? std::uniform_int_distribution<int>(0, 9)(random)
                        : std::exponential_distribution<double>(1.0)(random);
    problem.switch_load.push_back(w);
    std::shuffle(controllers.begin(), controllers.end(), random);
    const int f = std::uniform_int_distribution<int>(1, max_f)(random);
    problem.potential.emplace_back(controllers.begin(), controllers.begin() + f);
    std::vector<double> distance;
    for (int i = 0; i < f; ++i)
      distance.push_back(std::uniform_int_distribution<int>(1, 3)(random));
    problem.distance.push_back(distance);
  }
  return problem;
}

}  // namespace titan::balance

#endif  // TITAN_PLUGINS_BALANCE_POLICY_TEST_SUPPORT_H_
