#include "core/tensor/arena.h"

#include "absl/strings/str_cat.h"
#include "core/runtime/memory_snapshot.h"

namespace titan {

absl::StatusOr<int> ArenaPlan::Add(std::string name, std::vector<int64_t> shape, DType dtype) {
  if (index_.contains(name)) {
    return absl::AlreadyExistsError(
        absl::StrCat("ArenaPlan: expected unique names, found '", name, "' twice"));
  }
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  const int index = static_cast<int>(entries_.size());
  index_[name] = index;
  entries_.push_back(Entry{std::move(name), std::move(shape), dtype, total_bytes_});
  const size_t bytes = static_cast<size_t>(numel) * DTypeSize(dtype);
  total_bytes_ += (bytes + Storage::kAlignment - 1) / Storage::kAlignment * Storage::kAlignment;
  return index;
}

absl::StatusOr<Arena> Arena::Allocate(const ArenaPlan& plan, DevicePlugin* device,
                                      absl::string_view arena_name) {
  Arena arena;
  TITAN_ASSIGN_OR_RETURN(arena.storage_, Storage::Allocate(plan.total_bytes(), device));
  if (MemoryTracker::Get().enabled()) {
    std::vector<std::pair<std::string, size_t>> tensors;
    for (const ArenaPlan::Entry& entry : plan.entries()) {
      size_t bytes = DTypeSize(entry.dtype);
      for (int64_t d : entry.shape) bytes *= static_cast<size_t>(d);
      tensors.emplace_back(entry.name, bytes);
    }
    MemoryTracker::Get().Describe(arena.storage_->data(), std::string(arena_name),
                                  std::move(tensors));
  }
  for (const ArenaPlan::Entry& entry : plan.entries()) {
    TITAN_ASSIGN_OR_RETURN(
        Tensor tensor, Tensor::Over(arena.storage_, entry.byte_offset, entry.shape, entry.dtype));
    arena.index_[entry.name] = arena.size();
    arena.tensors_.push_back(std::move(tensor));
    arena.names_.push_back(entry.name);
  }
  return arena;
}

absl::StatusOr<Tensor> Arena::Find(absl::string_view name) const {
  auto it = index_.find(name);
  if (it == index_.end()) {
    return absl::NotFoundError(absl::StrCat("Arena: no tensor named '", name, "'"));
  }
  return tensors_[it->second];
}

}  // namespace titan
