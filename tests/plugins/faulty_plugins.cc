// Plugins that break the contract at the boundary, one per library, selected by the macro
// FAULT: a factory that returns null, a factory (constructor) that throws, a Configure that
// throws, and a Step that throws. The loader and the trainer must name the plugin, never crash.
#include <stdexcept>

#include "titan/optimizer.h"

namespace {

class Faulty : public titan::OptimizerPlugin {
 public:
#if FAULT == 2
  Faulty() { throw std::runtime_error("constructor failed on purpose"); }
#endif
#if FAULT == 3
  absl::Status Configure(const titan::ConfigView&) override {
    throw std::runtime_error("Configure failed on purpose");
  }
#endif
#if FAULT == 4
  // The keys of the debug recipe's [optimizer], so that a run reaches its first Step.
  std::vector<titan::ConfigKey> ConfigKeys() const override {
    return {
        {"lr", titan::ConfigType::kFloat, titan::ConfigValue(1e-3), "learning rate", {}, {}, {}},
        { "eps",
          titan::ConfigType::kFloat,
          titan::ConfigValue(1e-8),
          "unused",
          {},
          {},
          {} }};
  }
#endif
  std::vector<std::string> StateNames() const override { return {}; }
  absl::Status Step(const titan::OptimizerStep&) override {
#if FAULT == 4
    throw std::runtime_error("boom from plugin Step");
#endif
    return absl::OkStatus();
  }
};

#if FAULT == 1
titan::Plugin* CreateNothing() { return nullptr; }
const titan::PluginDescriptor kDescriptor = {TITAN_ABI_VERSION,
                                             "optimizer",
                                             "nullfactory",
                                             "0.0.1",
                                             "a factory returning null",
                                             &CreateNothing,
                                             titan::kKernelTableFingerprint};
#endif

}  // namespace

#if FAULT == 1
BOOST_DLL_ALIAS_SECTIONED(kDescriptor, TITAN_PLUGIN_SYMBOL_, titan)
#elif FAULT == 2
TITAN_PLUGIN(titan::OptimizerPlugin, Faulty, "throwingfactory", "0.0.1", "a throwing factory")
#elif FAULT == 3
TITAN_PLUGIN(titan::OptimizerPlugin, Faulty, "throwingconfigure", "0.0.1", "a throwing Configure")
#else
TITAN_PLUGIN(titan::OptimizerPlugin, Faulty, "throwingstep", "0.0.1", "a throwing Step")
#endif
