// torchao's default "tensorwise" recipe: one dynamic scale per tensor; inputs and weights in
// e4m3 (more precision), output gradients in e5m2 (more range).
#include "plugins/float8/recipe_plugin.h"

namespace titan::float8 {

class Tensorwise : public RecipePlugin {
 public:
  Tensorwise()
      : RecipePlugin({.output = {false, kTensorE4M3, kTensorE4M3},
                      .grad_input = {false, kTensorE5M2, kTensorE4M3},
                      .grad_weight = {false, kTensorE5M2, kTensorE4M3},
                      .power_of_two_scales = false}) {}
};

}  // namespace titan::float8

TITAN_PLUGIN(titan::Float8Plugin, titan::float8::Tensorwise, "tensorwise", "2.0.0",
             "Float8 with one dynamic scale per tensor (e4m3 forward, e5m2 gradients)")
