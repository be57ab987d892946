// Stochastic gradient descent with momentum, dampening, Nesterov and L2 weight decay, as
// torch.optim.SGD.
#include <optional>

#include "../check_step.h"

namespace titan::optimizer {

class Sgd : public OptimizerPlugin {
 public:
  std::vector<ConfigKey> ConfigKeys() const override {
    auto key = [](const char* name, std::optional<ConfigValue> value, std::string help) {
      ConfigKey k{name, ConfigType::kFloat, std::move(value), std::move(help), 0.0, {}, {}};
      return k;
    };
    return {key("lr", std::nullopt, "learning rate"),
            key("momentum", 0.0, "momentum factor; 0 disables momentum"),
            key("dampening", 0.0, "dampening of the momentum"),
            key("weight_decay", 0.0, "L2 penalty added to the gradient"),
            ConfigKey{"nesterov",
                      ConfigType::kBool,
                      ConfigValue(false),
                      "Nesterov momentum (needs momentum > 0 and dampening = 0)",
                      {},
                      {},
                      {}}};
  }

  absl::Status Configure(const ConfigView& config) override {
    TITAN_ASSIGN_OR_RETURN(momentum_, config.GetFloat("momentum"));
    TITAN_ASSIGN_OR_RETURN(dampening_, config.GetFloat("dampening"));
    TITAN_ASSIGN_OR_RETURN(weight_decay_, config.GetFloat("weight_decay"));
    TITAN_ASSIGN_OR_RETURN(nesterov_, config.GetBool("nesterov"));
    if (nesterov_ && (momentum_ <= 0.0 || dampening_ != 0.0)) {
      return config.Error("nesterov", "Nesterov momentum needs momentum > 0 and dampening = 0");
    }
    return absl::OkStatus();
  }

  std::vector<std::string> StateNames() const override {
    if (momentum_ == 0.0) return {};
    return {"momentum_buffer"};
  }

  absl::Status Step(const OptimizerStep& step) override {
    const int slots = momentum_ == 0.0 ? 0 : 1;
    TITAN_RETURN_IF_ERROR(CheckStep(step, slots));
    float* param = step.params.data_as<float>();
    const float* grad = step.grads.data_as<float>();
    float* buffer = step.state.data_as<float>();
    const float lr = static_cast<float>(step.lr);
    const float momentum = static_cast<float>(momentum_);
    const float keep = static_cast<float>(1.0 - dampening_);
    const bool first = step.step == 1;
    for (const ParamSegment& segment : step.segments) {
      const float decay = segment.weight_decay ? static_cast<float>(weight_decay_) : 0.0f;
      const int64_t end = segment.offset + segment.count;
#pragma omp parallel for schedule(static)
      for (int64_t i = segment.offset; i < end; ++i) {
        float g = grad[i] + decay * param[i];
        if (slots == 1) {
          buffer[i] = first ? g : momentum * buffer[i] + keep * g;
          g = nesterov_ ? g + momentum * buffer[i] : buffer[i];
        }
        param[i] -= lr * g;
      }
    }
    return absl::OkStatus();
  }

 private:
  double momentum_ = 0.0;
  double dampening_ = 0.0;
  double weight_decay_ = 0.0;
  bool nesterov_ = false;
};

}  // namespace titan::optimizer

TITAN_PLUGIN(titan::OptimizerPlugin, titan::optimizer::Sgd, "sgd", "1.0.0",
             "SGD with momentum, dampening and Nesterov (torch.optim.SGD)")
