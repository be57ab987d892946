// Tensor conversions between f32 and the 16-bit float formats (the scalar ones are the SDK's
// titan/float16.h). Float8 encodings live with the float8 plugin, which owns their scaling rules.
#ifndef TITAN_CORE_TENSOR_DTYPE_H_
#define TITAN_CORE_TENSOR_DTYPE_H_

#include <cstdint>
#include <cstring>

#include "titan/float16.h"
#include "titan/status.h"
#include "titan/tensor_view.h"

namespace titan {

// Copies src into dst converting element types; both contiguous, same element count, each one
// of f32, bf16, f16.
absl::Status ConvertTensor(const TensorView& src, const TensorView& dst);

}  // namespace titan

#endif  // TITAN_CORE_TENSOR_DTYPE_H_
