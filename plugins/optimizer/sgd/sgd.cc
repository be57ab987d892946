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
    for (const ParamSegment& segment : step.segments) {
      SgdUpdate update;
      update.lr = step.lr;
      update.momentum = momentum_;
      update.dampening = dampening_;
      update.weight_decay = segment.weight_decay ? weight_decay_ : 0.0;
      update.nesterov = nesterov_;
      update.step = step.step;
      const TensorView buffer =
          slots == 0 ? TensorView{} : Slice(step.state, segment.offset, segment.count);
      TITAN_RETURN_IF_ERROR(
          step.compute->SgdStep(update, Slice(step.params, segment.offset, segment.count),
                                Slice(step.grads, segment.offset, segment.count), buffer));
    }
    return absl::OkStatus();
  }
  bool SupportsDevice(DeviceType) const override { return true; }

 private:
  double momentum_ = 0.0;
  double dampening_ = 0.0;
  double weight_decay_ = 0.0;
  bool nesterov_ = false;
};

}  // namespace titan::optimizer

TITAN_PLUGIN(titan::OptimizerPlugin, titan::optimizer::Sgd, "sgd", "1.0.0",
             "SGD with momentum, dampening and Nesterov (torch.optim.SGD)")
