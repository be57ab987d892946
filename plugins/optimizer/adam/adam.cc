// Adam (Kingma & Ba) with L2 weight decay added to the gradient, as torch.optim.Adam.
#include "../adam_update.h"

namespace titan::optimizer {

class Adam : public OptimizerPlugin {
 public:
  std::vector<ConfigKey> ConfigKeys() const override { return AdamConfigKeys(0.0); }
  absl::Status Configure(const ConfigView& config) override {
    settings_.decoupled_weight_decay = false;
    return ReadAdamSettings(config, settings_);
  }
  std::vector<std::string> StateNames() const override { return {"exp_avg", "exp_avg_sq"}; }
  absl::Status Step(const OptimizerStep& step) override { return AdamStep(settings_, step); }

 private:
  AdamSettings settings_;
};

}  // namespace titan::optimizer

TITAN_PLUGIN(titan::OptimizerPlugin, titan::optimizer::Adam, "adam", "1.0.0",
             "Adam with L2 weight decay in the gradient (torch.optim.Adam)")
