// What the float8 recipe plugins share: float8.filter_fqns (a layer whose fully qualified name
// contains one of them stays in high precision, as torchao's filter) and a fixed recipe.
#ifndef TITAN_PLUGINS_FLOAT8_RECIPE_PLUGIN_H_
#define TITAN_PLUGINS_FLOAT8_RECIPE_PLUGIN_H_

#include <algorithm>
#include <string>
#include <vector>

#include "titan/float8.h"

namespace titan::float8 {

class RecipePlugin : public Float8Plugin {
 public:
  explicit RecipePlugin(const Float8Recipe& recipe) : recipe_(recipe) {}

  absl::Status Configure(const ConfigView& config) override {
    TITAN_ASSIGN_OR_RETURN(filter_fqns_, config.GetStringList("filter_fqns"));
    return absl::OkStatus();
  }
  Float8Recipe Recipe() const override { return recipe_; }
  bool Converts(absl::string_view module_name) const override {
    return std::none_of(filter_fqns_.begin(), filter_fqns_.end(), [&](const std::string& f) {
      return module_name.find(f) != absl::string_view::npos;
    });
  }

 private:
  Float8Recipe recipe_;
  std::vector<std::string> filter_fqns_;
};

inline constexpr Float8Cast kTensorE4M3 = {DType::kF8E4M3, Float8Granularity::kTensor};
inline constexpr Float8Cast kTensorE5M2 = {DType::kF8E5M2, Float8Granularity::kTensor};
inline constexpr Float8Cast kRowE4M3 = {DType::kF8E4M3, Float8Granularity::kRow};

}  // namespace titan::float8

#endif  // TITAN_PLUGINS_FLOAT8_RECIPE_PLUGIN_H_
