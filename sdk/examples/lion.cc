// Lion (Chen et al., 2023, "Symbolic Discovery of Optimization Algorithms"): the update is the
// sign of an interpolation of momentum and gradient, so every weight moves by exactly lr.
// An example of a plugin written outside titan's tree against the installed SDK.
#include <cmath>

#include "titan/optimizer.h"

namespace lion {

class Lion : public titan::OptimizerPlugin {
 public:
  std::vector<titan::ConfigKey> ConfigKeys() const override {
    auto key = [](const char* name, double value, std::string help) {
      titan::ConfigKey k{
          name, titan::ConfigType::kFloat, titan::ConfigValue(value), std::move(help), 0.0, 1.0,
          {}};
      return k;
    };
    return {key("lr", 1e-4, "learning rate (Lion wants 3-10x less than AdamW)"),
            key("beta1", 0.9, "interpolation of momentum and gradient for the update"),
            key("beta2", 0.99, "decay of the momentum"),
            key("weight_decay", 0.0, "decoupled weight decay")};
  }

  absl::Status Configure(const titan::ConfigView& config) override {
    TITAN_ASSIGN_OR_RETURN(beta1_, config.GetFloat("beta1"));
    TITAN_ASSIGN_OR_RETURN(beta2_, config.GetFloat("beta2"));
    TITAN_ASSIGN_OR_RETURN(weight_decay_, config.GetFloat("weight_decay"));
    return absl::OkStatus();
  }

  std::vector<std::string> StateNames() const override { return {"exp_avg"}; }

  absl::Status Step(const titan::OptimizerStep& step) override {
    if (step.grads.numel() != step.params.numel() || step.state.numel() != step.params.numel()) {
      return absl::InvalidArgumentError("lion: params, grads and state must be equally long");
    }
    float* param = step.params.data_as<float>();
    const float* grad = step.grads.data_as<float>();
    float* momentum = step.state.data_as<float>();
    const float lr = static_cast<float>(step.lr);
    for (const titan::ParamSegment& segment : step.segments) {
      const float decay = segment.weight_decay ? static_cast<float>(weight_decay_) : 0.0f;
      for (int64_t i = segment.offset; i < segment.offset + segment.count; ++i) {
        float mix =
            static_cast<float>(beta1_) * momentum[i] + static_cast<float>(1 - beta1_) * grad[i];
        float sign = static_cast<float>((mix > 0.0f) - (mix < 0.0f));
        param[i] = param[i] * (1.0f - lr * decay) - lr * sign;
        momentum[i] =
            static_cast<float>(beta2_) * momentum[i] + static_cast<float>(1 - beta2_) * grad[i];
      }
    }
    return absl::OkStatus();
  }

 private:
  double beta1_ = 0.9;
  double beta2_ = 0.99;
  double weight_decay_ = 0.0;
};

}  // namespace lion

TITAN_PLUGIN(titan::OptimizerPlugin, lion::Lion, "lion", "0.1.0",
             "Lion: sign of interpolated momentum (third-party example)")
