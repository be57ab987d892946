// The Adam update shared by the adam and adamw plugins; they differ only in how weight decay
// enters (added to the gradient for adam, applied to the weights for adamw), as in torch.optim.
#ifndef TITAN_PLUGINS_OPTIMIZER_ADAM_UPDATE_H_
#define TITAN_PLUGINS_OPTIMIZER_ADAM_UPDATE_H_

#include <cmath>
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

// Learning rate `lr` is the scheduled one for this step; settings.lr is only the default.
inline absl::Status AdamStep(const AdamSettings& settings, const OptimizerStep& step) {
  TITAN_RETURN_IF_ERROR(CheckStep(step, 2));
  const int64_t n = step.params.numel();
  float* param = step.params.data_as<float>();
  const float* grad = step.grads.data_as<float>();
  float* exp_avg = step.state.data_as<float>();
  float* exp_avg_sq = exp_avg + n;
  const double t = static_cast<double>(step.step);
  const float beta1 = static_cast<float>(settings.beta1);
  const float beta2 = static_cast<float>(settings.beta2);
  const float step_size = static_cast<float>(step.lr / (1.0 - std::pow(settings.beta1, t)));
  const float bias_correction2_sqrt =
      static_cast<float>(std::sqrt(1.0 - std::pow(settings.beta2, t)));
  const float eps = static_cast<float>(settings.eps);
  for (const ParamSegment& segment : step.segments) {
    const float decay = segment.weight_decay ? static_cast<float>(settings.weight_decay) : 0.0f;
    const float decoupled_scale = static_cast<float>(1.0 - step.lr * decay);
    const int64_t end = segment.offset + segment.count;
#pragma omp parallel for schedule(static)
    for (int64_t i = segment.offset; i < end; ++i) {
      float g = grad[i];
      if (settings.decoupled_weight_decay) {
        param[i] *= decoupled_scale;
      } else {
        g += decay * param[i];
      }
      exp_avg[i] = beta1 * exp_avg[i] + (1.0f - beta1) * g;
      exp_avg_sq[i] = beta2 * exp_avg_sq[i] + (1.0f - beta2) * g * g;
      float denom = std::sqrt(exp_avg_sq[i]) / bias_correction2_sqrt + eps;
      param[i] -= step_size * exp_avg[i] / denom;
    }
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

 private:
  AdamSettings settings_;
};

}  // namespace titan::optimizer

#endif  // TITAN_PLUGINS_OPTIMIZER_ADAM_UPDATE_H_
