// Owning tensors: a Storage (64-byte aligned host bytes) shared by Tensors that each see a
// dtype, shape and strides at an offset into it. TensorView is what crosses into plugins.
#ifndef TITAN_CORE_TENSOR_TENSOR_H_
#define TITAN_CORE_TENSOR_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "titan/device.h"
#include "titan/status.h"
#include "titan/tensor_view.h"

namespace titan {

class Storage {
 public:
  static constexpr size_t kAlignment = 64;

  // Zero-filled, so a fresh arena of gradients starts cleared. On `device` when given (its
  // memory, freed through it; the plugin outlives the storage), else host memory.
  static absl::StatusOr<std::shared_ptr<Storage>> Allocate(size_t bytes,
                                                           DevicePlugin* device = nullptr);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  Device device() const { return device_ == nullptr ? Device{} : Device{device_->type(), 0}; }

 private:
  Storage(void* data, size_t size, DevicePlugin* device)
      : data_(data), size_(size), device_(device) {}
  void* data_;
  size_t size_;
  DevicePlugin* device_;
  bool tracked_ = false;  // known to the MemoryTracker (profiling.enable_memory_snapshot)
};

class Tensor {
 public:
  Tensor() = default;
  // A contiguous, zero-filled tensor with storage of its own.
  static absl::StatusOr<Tensor> Zeros(std::vector<int64_t> shape, DType dtype = DType::kF32);
  // A contiguous tensor over `storage` starting `byte_offset` bytes in.
  static absl::StatusOr<Tensor> Over(std::shared_ptr<Storage> storage, size_t byte_offset,
                                     std::vector<int64_t> shape, DType dtype);

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  const std::vector<int64_t>& strides() const { return strides_; }
  int64_t dim(int i) const { return shape_[i < 0 ? shape_.size() + i : i]; }
  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * DTypeSize(dtype_); }
  bool is_contiguous() const { return view().is_contiguous(); }
  bool defined() const { return storage_ != nullptr; }

  void* raw_data() const;
  template <typename T>
  T* data() const {
    return static_cast<T*>(raw_data());
  }
  TensorView view() const;
  // Same bytes, another shape with as many elements; only for contiguous tensors.
  absl::StatusOr<Tensor> Reshape(std::vector<int64_t> shape) const;

 private:
  std::shared_ptr<Storage> storage_;
  size_t byte_offset_ = 0;
  DType dtype_ = DType::kF32;
  std::vector<int64_t> shape_;
  std::vector<int64_t> strides_;
};

std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& shape);

}  // namespace titan

#endif  // TITAN_CORE_TENSOR_TENSOR_H_
