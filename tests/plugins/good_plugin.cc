// A minimal well-formed optimizer plugin for the loader's tests: plain SGD.
#include "titan/optimizer.h"

namespace {

class TestGood : public titan::OptimizerPlugin {
 public:
  std::vector<std::string> StateNames() const override { return {}; }
  absl::Status Step(const titan::OptimizerStep& step) override {
    float* param = step.params.data_as<float>();
    const float* grad = step.grads.data_as<float>();
    for (int64_t i = 0; i < step.params.numel(); ++i)
      param[i] -= static_cast<float>(step.lr) * grad[i];
    return absl::OkStatus();
  }
};

}  // namespace

TITAN_PLUGIN(titan::OptimizerPlugin, TestGood, "testgood", "0.0.1", "loader test plugin")
