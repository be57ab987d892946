// `float8` plugins: a Float8 training recipe (how tensors are scaled and cast to f8e4m3 /
// f8e5m2 before a matmul, and which layers are converted).
#ifndef TITAN_FLOAT8_H_
#define TITAN_FLOAT8_H_

#include "absl/strings/string_view.h"
#include "titan/plugin.h"
#include "titan/tensor_view.h"

namespace titan {

enum class Float8Role : uint8_t { kInput, kWeight, kGradOutput };

class Float8Plugin : public Plugin {
 public:
  // Whether the linear layer with this fully qualified name runs in float8.
  virtual bool Converts(absl::string_view module_name) const = 0;
  // Scales and casts `input` (f32 or bf16) into `output` (an f8 dtype chosen by the recipe for
  // the role), writing the inverse scales (f32) the matmul applies afterwards.
  virtual absl::Status Quantize(const TensorView& input, Float8Role role, TensorView output,
                                TensorView inverse_scales) = 0;
};

template <>
struct PluginKind<Float8Plugin> {
  static constexpr const char* kName = "float8";
};

}  // namespace titan

#endif  // TITAN_FLOAT8_H_
