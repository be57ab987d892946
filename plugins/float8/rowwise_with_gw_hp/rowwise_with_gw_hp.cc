// torchao's "rowwise_with_gw_hp" recipe: the forward as rowwise, the input gradient from
// rowwise output gradients and a tensorwise weight, and the weight gradient in high precision
// (the model's matmul dtype), which keeps the weight updates more accurate.
#include "plugins/float8/recipe_plugin.h"

namespace titan::float8 {

class RowwiseWithGwHp : public RecipePlugin {
 public:
  RowwiseWithGwHp()
      : RecipePlugin({.output = {false, kRowE4M3, kRowE4M3},
                      .grad_input = {false, kRowE4M3, kTensorE4M3},
                      .grad_weight = {true, {}, {}},
                      .power_of_two_scales = true}) {}
};

}  // namespace titan::float8

TITAN_PLUGIN(titan::Float8Plugin, titan::float8::RowwiseWithGwHp, "rowwise-with-gw-hp", "1.0.0",
             "Float8 rowwise, with the weight gradient's GEMM in high precision")
