// The CPU compute's checks of its operands (titan/compute_operands.h, against the cpu).
#ifndef TITAN_CORE_TENSOR_INTERNAL_OPERANDS_H_
#define TITAN_CORE_TENSOR_INTERNAL_OPERANDS_H_

#include <cstdint>

#include "titan/compute_operands.h"

namespace titan::internal {

inline absl::Status Expect(const char* kernel, const char* operand, const TensorView& x,
                           DType dtype, int64_t numel = -1) {
  return ExpectOperand(kernel, operand, x, DeviceType::kCpu, dtype, numel);
}

}  // namespace titan::internal

#endif  // TITAN_CORE_TENSOR_INTERNAL_OPERANDS_H_
