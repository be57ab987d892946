// Float8 with one scale per tensor (TorchTitan's default "tensorwise" recipe): each tensor is
// scaled so its largest magnitude maps to the format's largest finite value, then cast.
// Inputs and weights use e4m3 (more precision); output gradients use e5m2 (more range).
#include <algorithm>
#include <cmath>

#include "titan/float8_cast.h"
#include "absl/strings/str_cat.h"
#include "titan/float8.h"

namespace titan::float8 {

class Tensorwise : public Float8Plugin {
 public:
  absl::Status Configure(const ConfigView& config) override {
    TITAN_ASSIGN_OR_RETURN(filter_fqns_, config.GetStringList("filter_fqns"));
    return absl::OkStatus();
  }

  bool Converts(absl::string_view module_name) const override {
    return std::none_of(filter_fqns_.begin(), filter_fqns_.end(), [&](const std::string& f) {
      return module_name.find(f) != absl::string_view::npos;
    });
  }

  absl::Status Quantize(const TensorView& input, Float8Role role, TensorView output,
                        TensorView inverse_scales) override {
    const DType want = role == Float8Role::kGradOutput ? DType::kF8E5M2 : DType::kF8E4M3;
    if (input.dtype != DType::kF32 || !input.is_contiguous()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensorwise float8: input must be contiguous f32, got ", DTypeName(input.dtype)));
    }
    if (output.dtype != want || output.numel() != input.numel()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensorwise float8: output must be ", input.numel(), " x ", DTypeName(want),
                       ", got ", output.numel(), " x ", DTypeName(output.dtype)));
    }
    if (inverse_scales.dtype != DType::kF32 || inverse_scales.numel() != 1) {
      return absl::InvalidArgumentError("tensorwise float8: inverse_scales must be one f32");
    }
    const Float8Format& format = want == DType::kF8E4M3 ? kE4M3 : kE5M2;
    const float* x = input.data_as<float>();
    const int64_t n = input.numel();
    float amax = 0.0f;
#pragma omp parallel for reduction(max : amax) schedule(static)
    for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
    // As torchao: a floor on amax keeps an all-zero tensor from dividing by zero.
    const float scale = static_cast<float>(format.max_finite / std::max<double>(amax, 1e-12));
    uint8_t* out = output.data_as<uint8_t>();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) out[i] = EncodeFloat8(x[i] * scale, format);
    *inverse_scales.data_as<float>() = 1.0f / scale;
    return absl::OkStatus();
  }

 private:
  std::vector<std::string> filter_fqns_;
};

}  // namespace titan::float8

TITAN_PLUGIN(titan::Float8Plugin, titan::float8::Tensorwise, "tensorwise", "1.0.0",
             "Float8 with one dynamic scale per tensor (e4m3 forward, e5m2 gradients)")
