#include "core/tensor/tensor.h"

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/runtime/memory_snapshot.h"

namespace titan {

namespace {

const char* DeviceName(DevicePlugin* device) {
  return device == nullptr || device->type() == DeviceType::kCpu ? "cpu" : "cuda:0";
}

}  // namespace

absl::StatusOr<std::shared_ptr<Storage>> Storage::Allocate(size_t bytes, DevicePlugin* device) {
  // aligned_alloc wants a multiple of the alignment, and a zero-byte tensor still needs an address.
  const size_t rounded =
      std::max<size_t>(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  void* data = nullptr;
  if (device != nullptr) {
    absl::StatusOr<void*> allocated = device->Allocate(rounded);
    if (!allocated.ok()) {
      // The CPU device (in the core) writes its own snapshot; another device's plugin cannot.
      return device->type() == DeviceType::kCpu
                 ? allocated.status()
                 : WithSnapshot(allocated.status(),
                                MemoryTracker::Get().OnOutOfMemory(bytes, DeviceName(device)));
    }
    data = *allocated;
  } else {
    data = std::aligned_alloc(kAlignment, rounded);
    if (data == nullptr) {
      return WithSnapshot(absl::ResourceExhaustedError(absl::StrCat(
                              "Storage: could not allocate ", bytes, " bytes of host memory")),
                          MemoryTracker::Get().OnOutOfMemory(bytes, "cpu"));
    }
  }
  std::shared_ptr<Storage> storage(new Storage(data, bytes, device));
  if (MemoryTracker::Get().enabled()) {
    storage->tracked_ = true;
    MemoryTracker::Get().Add(data, bytes, DeviceName(device), "(none)");
    // The CPU device knew it as a buffer of its own: it is a tensor's.
    MemoryTracker::Get().Describe(data, "(none)", {{"tensor", bytes}});
  }
  if (device != nullptr) {
    TITAN_RETURN_IF_ERROR(device->FillF32(static_cast<float*>(data), rounded / sizeof(float), 0));
  } else {
    std::memset(data, 0, rounded);
  }
  return storage;
}

Storage::~Storage() {
  if (tracked_) MemoryTracker::Get().Remove(data_);
  if (device_ == nullptr) {
    std::free(data_);
  } else {
    device_->Free(data_).IgnoreError();  // nothing left to report it to
  }
}

std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  return strides;
}

namespace {

absl::StatusOr<int64_t> CheckedNumel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) {
      return absl::InvalidArgumentError(absl::StrCat("Tensor: expected non-negative sizes, found [",
                                                     absl::StrJoin(shape, ", "), "]"));
    }
    n *= d;
  }
  return n;
}

}  // namespace

absl::StatusOr<Tensor> Tensor::Zeros(std::vector<int64_t> shape, DType dtype) {
  TITAN_ASSIGN_OR_RETURN(int64_t n, CheckedNumel(shape));
  TITAN_ASSIGN_OR_RETURN(auto storage,
                         Storage::Allocate(static_cast<size_t>(n) * DTypeSize(dtype)));
  return Over(std::move(storage), 0, std::move(shape), dtype);
}

absl::StatusOr<Tensor> Tensor::Over(std::shared_ptr<Storage> storage, size_t byte_offset,
                                    std::vector<int64_t> shape, DType dtype) {
  TITAN_ASSIGN_OR_RETURN(int64_t n, CheckedNumel(shape));
  const size_t end = byte_offset + static_cast<size_t>(n) * DTypeSize(dtype);
  if (storage == nullptr || end > storage->size()) {
    return absl::OutOfRangeError(absl::StrCat("Tensor: expected bytes [", byte_offset, ", ", end,
                                              ") inside the storage, found ",
                                              storage == nullptr ? 0 : storage->size(), " bytes"));
  }
  Tensor tensor;
  tensor.storage_ = std::move(storage);
  tensor.byte_offset_ = byte_offset;
  tensor.dtype_ = dtype;
  tensor.strides_ = ContiguousStrides(shape);
  tensor.shape_ = std::move(shape);
  return tensor;
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

void* Tensor::raw_data() const {
  return storage_ == nullptr ? nullptr : static_cast<char*>(storage_->data()) + byte_offset_;
}

TensorView Tensor::view() const {
  return TensorView{raw_data(), dtype_, storage_ ? storage_->device() : Device{}, shape_, strides_};
}

absl::StatusOr<Tensor> Tensor::Reshape(std::vector<int64_t> shape) const {
  TITAN_ASSIGN_OR_RETURN(int64_t n, CheckedNumel(shape));
  if (n != numel() || !is_contiguous()) {
    return absl::InvalidArgumentError(absl::StrCat("Reshape: expected a contiguous tensor of ", n,
                                                   " elements for [", absl::StrJoin(shape, ", "),
                                                   "], found ", numel(), " elements in [",
                                                   absl::StrJoin(shape_, ", "), "]"));
  }
  return Over(storage_, byte_offset_, std::move(shape), dtype_);
}

}  // namespace titan
