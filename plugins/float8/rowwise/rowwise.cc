// torchao's "rowwise" recipe: one scale per row of each GEMM operand (per token of the
// activations, per output or input feature of the weight), e4m3 everywhere, every scale
// rounded down to a power of two.
#include "plugins/float8/recipe_plugin.h"

namespace titan::float8 {

class Rowwise : public RecipePlugin {
 public:
  Rowwise()
      : RecipePlugin({.output = {false, kRowE4M3, kRowE4M3},
                      .grad_input = {false, kRowE4M3, kRowE4M3},
                      .grad_weight = {false, kRowE4M3, kRowE4M3},
                      .power_of_two_scales = true}) {}
};

}  // namespace titan::float8

TITAN_PLUGIN(titan::Float8Plugin, titan::float8::Rowwise, "rowwise", "1.0.0",
             "Float8 with one power-of-two scale per row, e4m3 everywhere")
