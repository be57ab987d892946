// A non-owning view of a tensor: where its bytes are, their type, shape and strides.
#ifndef TITAN_TENSOR_VIEW_H_
#define TITAN_TENSOR_VIEW_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace titan {

enum class DType : uint8_t { kF32, kBF16, kF16, kF8E4M3, kF8E5M2, kI32, kI64 };

constexpr size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kBF16:
    case DType::kF16:
      return 2;
    case DType::kF8E4M3:
    case DType::kF8E5M2:
      return 1;
    case DType::kI64:
      return 8;
  }
  return 0;
}

constexpr const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "f16";
    case DType::kF8E4M3:
      return "f8e4m3";
    case DType::kF8E5M2:
      return "f8e5m2";
    case DType::kI32:
      return "i32";
    case DType::kI64:
      return "i64";
  }
  return "unknown";
}

enum class DeviceType : uint8_t { kCpu, kCuda };

struct Device {
  DeviceType type = DeviceType::kCpu;
  int index = 0;
  bool operator==(const Device&) const = default;
};

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kF32;
  Device device;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // in elements; empty means contiguous row-major

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  size_t nbytes() const { return static_cast<size_t>(numel()) * DTypeSize(dtype); }
  bool is_contiguous() const {
    if (strides.empty()) return true;
    int64_t expected = 1;
    for (size_t i = shape.size(); i-- > 0;) {
      if (shape[i] != 1 && strides[i] != expected) return false;
      expected *= shape[i];
    }
    return true;
  }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data);
  }
};

// A contiguous 1-D f32 view, the shape every flat arena slice takes (host memory by default).
inline TensorView FlatF32(float* data, int64_t count, Device device = {}) {
  return TensorView{data, DType::kF32, device, {count}, {}};
}

}  // namespace titan

#endif  // TITAN_TENSOR_VIEW_H_
