// Element conversions between the float dtypes a checkpoint stores (f32, bf16, f16), over
// buffers that need not be aligned: a file's bytes are read where they lie.
#ifndef TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_CONVERT_H_
#define TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_CONVERT_H_

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "titan/float16.h"
#include "titan/status.h"
#include "titan/tensor_view.h"

namespace titan::safetensors {

inline bool IsStoredFloat(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16;
}

// Copies `count` elements from src to dst; a plain copy when the dtypes agree, so values that
// need no conversion keep their exact bits.
inline absl::Status ConvertElements(const void* src, DType src_dtype, void* dst, DType dst_dtype,
                                    int64_t count) {
  if (!IsStoredFloat(src_dtype) || !IsStoredFloat(dst_dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("cannot convert ", DTypeName(src_dtype), " to ",
                                                   DTypeName(dst_dtype),
                                                   ": expected f32, bf16 or f16"));
  }
  if (src_dtype == dst_dtype) {
    std::memcpy(dst, src, static_cast<size_t>(count) * DTypeSize(src_dtype));
    return absl::OkStatus();
  }
  const char* in = static_cast<const char*>(src);
  char* out = static_cast<char*>(dst);
  for (int64_t i = 0; i < count; ++i) {
    float value;
    uint16_t bits;
    if (src_dtype == DType::kF32) {
      std::memcpy(&value, in + 4 * i, 4);
    } else {
      std::memcpy(&bits, in + 2 * i, 2);
      value = src_dtype == DType::kBF16 ? Bf16ToF32(bits) : F16ToF32(bits);
    }
    if (dst_dtype == DType::kF32) {
      std::memcpy(out + 4 * i, &value, 4);
    } else {
      bits = dst_dtype == DType::kBF16 ? F32ToBf16(value) : F32ToF16(value);
      std::memcpy(out + 2 * i, &bits, 2);
    }
  }
  return absl::OkStatus();
}

// Multiplies (or divides) `count` elements in place by `factor`, in double, rounded once to the
// dtype: the rows Hugging Face's layout holds scaled (RowLayout::Scale).
inline void ScaleElements(void* data, DType dtype, int64_t count, double factor, bool divide) {
  char* bytes = static_cast<char*>(data);
  const size_t size = DTypeSize(dtype);
  for (int64_t i = 0; i < count; ++i) {
    float value;
    uint16_t bits;
    if (dtype == DType::kF32) {
      std::memcpy(&value, bytes + size * i, 4);
    } else {
      std::memcpy(&bits, bytes + size * i, 2);
      value = dtype == DType::kBF16 ? Bf16ToF32(bits) : F16ToF32(bits);
    }
    const double scaled = divide ? value / factor : value * factor;
    value = static_cast<float>(scaled);
    if (dtype == DType::kF32) {
      std::memcpy(bytes + size * i, &value, 4);
    } else {
      bits = dtype == DType::kBF16 ? F32ToBf16(value) : F32ToF16(value);
      std::memcpy(bytes + size * i, &bits, 2);
    }
  }
}

}  // namespace titan::safetensors

#endif  // TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_CONVERT_H_
