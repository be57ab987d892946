// The Adam update shared by the adam and adamw plugins; they differ only in how weight decay
// enters (added to the gradient for adam, applied to the weights for adamw), as in torch.optim.
#ifndef TITAN_PLUGINS_OPTIMIZER_ADAM_UPDATE_H_
#define TITAN_PLUGINS_OPTIMIZER_ADAM_UPDATE_H_

#include <vector>

#include "check_step.h"
#include "titan/optimizer.h"

namespace titan::optimizer {

struct AdamSettings {
  double lr = 8e-4;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
  bool decoupled_weight_decay = true;
};

inline std::vector<ConfigKey> AdamConfigKeys(double default_weight_decay) {
  auto key = [](const char* name, double value, double min, std::string help) {
    ConfigKey k{name, ConfigType::kFloat, ConfigValue(value), std::move(help), {}, {}, {}};
    k.min = min;
    return k;
  };
  return {key("lr", 8e-4, 0.0, "peak learning rate"),
          key("beta1", 0.9, 0.0, "decay of the first-moment average, below 1"),
          key("beta2", 0.95, 0.0, "decay of the second-moment average, below 1"),
          key("eps", 1e-8, 0.0, "added to the denominator"),
          key("weight_decay", default_weight_decay, 0.0, "weight decay coefficient")};
}

inline absl::Status ReadAdamSettings(const ConfigView& config, AdamSettings& settings) {
  TITAN_ASSIGN_OR_RETURN(settings.lr, config.GetFloat("lr"));
  TITAN_ASSIGN_OR_RETURN(settings.beta1, config.GetFloat("beta1"));
  TITAN_ASSIGN_OR_RETURN(settings.beta2, config.GetFloat("beta2"));
  TITAN_ASSIGN_OR_RETURN(settings.eps, config.GetFloat("eps"));
  TITAN_ASSIGN_OR_RETURN(settings.weight_decay, config.GetFloat("weight_decay"));
  if (settings.beta1 >= 1.0) return config.Error("beta1", "must be below 1");
  if (settings.beta2 >= 1.0) return config.Error("beta2", "must be below 1");
  return absl::OkStatus();
}

// Learning rate `lr` is the scheduled one for this step; settings.lr is only the default. Each
// segment is one fused update on the buffers' device.
inline absl::Status AdamStep(const AdamSettings& settings, const OptimizerStep& step) {
  TITAN_RETURN_IF_ERROR(CheckStep(step, 2));
  const int64_t n = step.params.numel();
  for (const ParamSegment& segment : step.segments) {
    AdamUpdate update;
    update.lr = step.lr;
    update.beta1 = settings.beta1;
    update.beta2 = settings.beta2;
    update.eps = settings.eps;
    update.weight_decay = segment.weight_decay ? settings.weight_decay : 0.0;
    update.decoupled_weight_decay = settings.decoupled_weight_decay;
    update.step = step.step;
    TITAN_RETURN_IF_ERROR(
        step.compute->AdamStep(update, Slice(step.params, segment.offset, segment.count),
                               Slice(step.grads, segment.offset, segment.count),
                               Slice(step.state, segment.offset, segment.count),
                               Slice(step.state, n + segment.offset, segment.count)));
  }
  return absl::OkStatus();
}

// Adam and AdamW as one plugin class: they differ only in where weight decay enters and in
// torch.optim's default decay (0 for Adam, 0.1 here for AdamW as in TorchTitan).
template <bool kDecoupledWeightDecay>
class AdamFamily : public OptimizerPlugin {
 public:
  std::vector<ConfigKey> ConfigKeys() const override {
    return AdamConfigKeys(kDecoupledWeightDecay ? 0.1 : 0.0);
  }
  absl::Status Configure(const ConfigView& config) override {
    settings_.decoupled_weight_decay = kDecoupledWeightDecay;
    return ReadAdamSettings(config, settings_);
  }
  std::vector<std::string> StateNames() const override { return {"exp_avg", "exp_avg_sq"}; }
  absl::Status Step(const OptimizerStep& step) override { return AdamStep(settings_, step); }
  bool SupportsDevice(DeviceType) const override { return true; }

 private:
  AdamSettings settings_;
};

}  // namespace titan::optimizer

#endif  // TITAN_PLUGINS_OPTIMIZER_ADAM_UPDATE_H_
