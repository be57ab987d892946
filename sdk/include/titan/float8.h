// `float8` plugins: a Float8 training recipe. The plugin describes how each of a linear layer's
// three GEMMs casts its operands (format, scale granularity) and which layers convert; the
// model's compute does the casting and the GEMMs (Compute::Float8Quantize and Float8Gemm).
#ifndef TITAN_FLOAT8_H_
#define TITAN_FLOAT8_H_

#include "absl/strings/string_view.h"
#include "titan/compute.h"
#include "titan/plugin.h"

namespace titan {

// How one GEMM operand is cast: its Float8 format and one scale for the tensor or one per row,
// a row being the operand as Float8Gemm takes it (the reduced dimension last).
struct Float8Cast {
  DType dtype = DType::kF8E4M3;  // kF8E4M3 or kF8E5M2
  Float8Granularity granularity = Float8Granularity::kTensor;
};

// One GEMM of a linear layer y = x W^T, as Float8Gemm's c = a . b^T:
//   output:      y  = x . W^T      a = x [tokens, in],   b = W [out, in]
//   grad_input:  dx = dy . W       a = dy [tokens, out], b = W^T [in, out]
//   grad_weight: dW = dy^T . x     a = dy^T [out, tokens], b = x^T [in, tokens]
// A high-precision GEMM ignores a and b and runs in the model's matmul dtype (f32 or bf16).
struct Float8GemmRecipe {
  bool high_precision = false;
  Float8Cast a, b;
};

struct Float8Recipe {
  Float8GemmRecipe output, grad_input, grad_weight;
  bool power_of_two_scales = false;  // every scale rounded down to a power of two
};

class Float8Plugin : public Plugin {
 public:
  virtual Float8Recipe Recipe() const = 0;
  // Whether the linear layer with this fully qualified name ("layers.0.attention.wq") may run
  // in Float8 (float8.filter_fqns keeps the others in high precision).
  virtual bool Converts(absl::string_view module_name) const = 0;
};

template <>
struct PluginKind<Float8Plugin> {
  static constexpr const char* kName = "float8";
};

}  // namespace titan

#endif  // TITAN_FLOAT8_H_
