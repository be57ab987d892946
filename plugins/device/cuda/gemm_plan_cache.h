// cuBLASLt plans kept across calls. A training step makes about 340 GEMMs of a few dozen distinct
// problems; building the descriptors, layouts and preference and asking the heuristic each time
// costs more host time than many of the GEMMs take on the GPU. A plan is built once per
// GemmPlanKey (what the descriptors and the heuristic's choice depend on) and kept, the least
// recently used dropped past a bound (generation's growing lengths make a new shape per token).
#ifndef TITAN_PLUGINS_DEVICE_CUDA_GEMM_PLAN_CACHE_H_
#define TITAN_PLUGINS_DEVICE_CUDA_GEMM_PLAN_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "titan/status.h"

namespace titan::cuda {

// The largest power of two (up to 256) the address is a multiple of: cuBLASLt otherwise assumes
// 256-byte alignment, which views into the middle of an arena do not have, so an algorithm is
// chosen for the alignment the operands have and only reused for operands as aligned.
inline uint32_t AlignmentOf(const void* pointer) {
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

// One operand as cuBLASLt sees it (column-major), without its address.
struct GemmPlanOperand {
  int32_t type = 0;  // cudaDataType_t
  int64_t rows = 0, columns = 0, leading = 0;
  bool transpose = false;
  uint32_t alignment = 256;
  bool scaled = false;  // an FP8 operand with a device scale pointer
  friend bool operator==(const GemmPlanOperand&, const GemmPlanOperand&) = default;
};

// What a plan depends on: shapes, data types, transposes, alignments, scale mode and epilogue.
// Pointers, alpha and beta are the call's and not part of it.
struct GemmPlanKey {
  GemmPlanOperand a, b;
  int32_t c_type = 0;  // cudaDataType_t of C and D
  int64_t c_rows = 0, c_columns = 0, c_leading = 0;
  uint32_t c_alignment = 256;
  int32_t compute = 0;  // cublasComputeType_t
  bool outer_vector_scales = false;
  int32_t epilogue = 0;  // cublasLtEpilogue_t
  friend bool operator==(const GemmPlanKey&, const GemmPlanKey&) = default;
};

struct GemmPlanKeyHash {
  size_t operator()(const GemmPlanKey& key) const {
    size_t seed = 0;
    const auto mix = [&seed](uint64_t value) {  // boost::hash_combine's mixing
      seed ^= std::hash<uint64_t>{}(value) + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2);
    };
    for (const GemmPlanOperand* x : {&key.a, &key.b}) {
      for (uint64_t v : {uint64_t(uint32_t(x->type)), uint64_t(x->rows), uint64_t(x->columns),
                         uint64_t(x->leading), uint64_t(x->transpose), uint64_t(x->alignment),
                         uint64_t(x->scaled)}) {
        mix(v);
      }
    }
    for (uint64_t v :
         {uint64_t(uint32_t(key.c_type)), uint64_t(key.c_rows), uint64_t(key.c_columns),
          uint64_t(key.c_leading), uint64_t(key.c_alignment), uint64_t(uint32_t(key.compute)),
          uint64_t(key.outer_vector_scales), uint64_t(uint32_t(key.epilogue))}) {
      mix(v);
    }
    return seed;
  }
};

// Plans by key (a GemmPlanKey unless told otherwise), at most `capacity`, least recently used
// dropped first. A plan that cannot be built because cuBLASLt has no algorithm for it (an
// Unimplemented status from `build`) is remembered as such, so a refused problem asks the heuristic
// once; other failures (out of memory, say) are returned and not kept. Thread-safe; the plan
// returned stays valid until the next FindOrBuild, which may drop it, so the caller holds `lock()`
// while it uses the plan.
template <typename Plan, typename Key = GemmPlanKey, typename KeyHash = GemmPlanKeyHash>
class PlanCache {
 public:
  explicit PlanCache(size_t capacity) : capacity_(capacity < 1 ? 1 : capacity) {}
  PlanCache(const PlanCache&) = delete;
  PlanCache& operator=(const PlanCache&) = delete;

  std::mutex& lock() { return mutex_; }

  // The plan for `key`, built by `build()` (absl::StatusOr<Plan>) the first time. Call with
  // lock() held.
  template <typename Build>
  absl::StatusOr<Plan*> FindOrBuild(const Key& key, Build&& build) {
    auto found = index_.find(key);
    if (found != index_.end()) {
      entries_.splice(entries_.begin(), entries_, found->second);  // now the most recent
      absl::StatusOr<Plan>& entry = found->second->second;
      if (!entry.ok()) return entry.status();
      return &*entry;
    }
    absl::StatusOr<Plan> built = build();
    ++builds_;
    if (!built.ok() && !absl::IsUnimplemented(built.status())) return built.status();
    if (entries_.size() == capacity_) {
      index_.erase(entries_.back().first);
      entries_.pop_back();
    }
    entries_.emplace_front(key, std::move(built));
    index_.emplace(key, entries_.begin());
    absl::StatusOr<Plan>& entry = entries_.front().second;
    if (!entry.ok()) return entry.status();
    return &*entry;
  }

  size_t size() const { return entries_.size(); }
  // How many plans `build` was asked for: the heuristic calls made.
  int64_t builds() const { return builds_; }

 private:
  using Entry = std::pair<Key, absl::StatusOr<Plan>>;
  size_t capacity_;
  std::mutex mutex_;
  std::list<Entry> entries_;  // most recently used first
  std::unordered_map<Key, typename std::list<Entry>::iterator, KeyHash> index_;
  int64_t builds_ = 0;
};

}  // namespace titan::cuda

#endif  // TITAN_PLUGINS_DEVICE_CUDA_GEMM_PLAN_CACHE_H_
