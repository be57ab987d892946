// For the model's tests: float8 plugins without the registry, torchao's tensorwise and rowwise
// recipes with a substring filter.
#ifndef TITAN_CORE_MODEL_FLOAT8_TEST_PLUGIN_H_
#define TITAN_CORE_MODEL_FLOAT8_TEST_PLUGIN_H_

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "titan/float8.h"

namespace titan {

class TensorwiseTestPlugin : public Float8Plugin {
 public:
  explicit TensorwiseTestPlugin(std::vector<std::string> filter = {})
      : filter_(std::move(filter)) {}
  Float8Recipe Recipe() const override {
    const Float8Cast e4m3 = {DType::kF8E4M3, Float8Granularity::kTensor};
    const Float8Cast e5m2 = {DType::kF8E5M2, Float8Granularity::kTensor};
    return {{false, e4m3, e4m3}, {false, e5m2, e4m3}, {false, e5m2, e4m3}, false};
  }
  bool Converts(absl::string_view name) const override {
    for (const std::string& f : filter_) {
      if (absl::StrContains(name, f)) return false;
    }
    return true;
  }

 private:
  std::vector<std::string> filter_;
};

class RowwiseTestPlugin : public TensorwiseTestPlugin {
 public:
  using TensorwiseTestPlugin::TensorwiseTestPlugin;
  Float8Recipe Recipe() const override {
    const Float8Cast e4m3 = {DType::kF8E4M3, Float8Granularity::kRow};
    return {{false, e4m3, e4m3}, {false, e4m3, e4m3}, {false, e4m3, e4m3}, true};
  }
};

}  // namespace titan

#endif  // TITAN_CORE_MODEL_FLOAT8_TEST_PLUGIN_H_
