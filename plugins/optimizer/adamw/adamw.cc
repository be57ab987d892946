// AdamW (Loshchilov & Hutter): Adam with weight decay applied to the weights, as torch.optim.AdamW.
#include "../adam_update.h"

namespace titan::optimizer {

class AdamW : public OptimizerPlugin {
 public:
  std::vector<ConfigKey> ConfigKeys() const override { return AdamConfigKeys(0.1); }
  absl::Status Configure(const ConfigView& config) override {
    return ReadAdamSettings(config, settings_);
  }
  std::vector<std::string> StateNames() const override { return {"exp_avg", "exp_avg_sq"}; }
  absl::Status Step(const OptimizerStep& step) override { return AdamStep(settings_, step); }

 private:
  AdamSettings settings_;
};

}  // namespace titan::optimizer

TITAN_PLUGIN(titan::OptimizerPlugin, titan::optimizer::AdamW, "adamw", "1.0.0",
             "AdamW: Adam with decoupled weight decay (torch.optim.AdamW)")
