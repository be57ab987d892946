// One allocation holding many named tensors (llm.c style: a table of offsets), so the optimizer
// and collectives see parameters, gradients or optimizer state as one flat buffer.
#ifndef TITAN_CORE_TENSOR_ARENA_H_
#define TITAN_CORE_TENSOR_ARENA_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core/tensor/tensor.h"

namespace titan {

// The table of offsets, built before any memory is touched; every entry starts on a 64-byte
// boundary so each tensor is as aligned as the allocation.
class ArenaPlan {
 public:
  // Returns the entry's index; names must be unique.
  absl::StatusOr<int> Add(std::string name, std::vector<int64_t> shape, DType dtype = DType::kF32);

  struct Entry {
    std::string name;
    std::vector<int64_t> shape;
    DType dtype;
    size_t byte_offset;
  };
  const std::vector<Entry>& entries() const { return entries_; }
  size_t total_bytes() const { return total_bytes_; }

 private:
  std::vector<Entry> entries_;
  absl::flat_hash_map<std::string, int> index_;
  size_t total_bytes_ = 0;
};

class Arena {
 public:
  Arena() = default;
  // On `device` when given, else in host memory. `arena_name` is what memory snapshots call it.
  static absl::StatusOr<Arena> Allocate(const ArenaPlan& plan, DevicePlugin* device = nullptr,
                                        absl::string_view arena_name = "arena");

  int size() const { return static_cast<int>(tensors_.size()); }
  const Tensor& at(int index) const { return tensors_[index]; }
  const std::string& name(int index) const { return names_[index]; }
  absl::StatusOr<Tensor> Find(absl::string_view name) const;
  // The whole allocation as one f32 run (padding included, always zero), for one-pass updates.
  float* flat_data() const { return static_cast<float*>(storage_ ? storage_->data() : nullptr); }
  size_t flat_size() const { return storage_ ? storage_->size() / sizeof(float) : 0; }
  // Whether `data` points into this arena's allocation.
  bool Contains(const void* data) const {
    const auto* begin = static_cast<const char*>(storage_ ? storage_->data() : nullptr);
    const auto* at = static_cast<const char*>(data);
    return begin != nullptr && at >= begin && at < begin + storage_->size();
  }

 private:
  std::shared_ptr<Storage> storage_;
  std::vector<Tensor> tensors_;
  std::vector<std::string> names_;
  absl::flat_hash_map<std::string, int> index_;
};

}  // namespace titan

#endif  // TITAN_CORE_TENSOR_ARENA_H_
