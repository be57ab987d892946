#include "core/cpu/f32_image.h"

#include <algorithm>
#include <utility>

#include "core/tensor/vector_kernels.h"

namespace titan {
namespace {

// This thread's free copies, each at the largest size it was taken at.
std::vector<std::vector<float>>& Pool() {
  thread_local std::vector<std::vector<float>> pool;
  return pool;
}

// A free copy of at least n floats: the smallest that holds n, else the largest, grown to n.
std::vector<float> Take(size_t n) {
  std::vector<std::vector<float>>& pool = Pool();
  auto fits = pool.end(), largest = pool.end();
  for (auto it = pool.begin(); it != pool.end(); ++it) {
    if (it->size() >= n && (fits == pool.end() || it->size() < fits->size())) fits = it;
    if (largest == pool.end() || it->size() > largest->size()) largest = it;
  }
  const auto best = fits != pool.end() ? fits : largest;
  std::vector<float> copy;
  if (best != pool.end()) {
    copy = std::move(*best);
    pool.erase(best);
  }
  // Never shrunk: a copy resized down and up again would be zero-filled anew at each use.
  if (copy.size() < n) copy.resize(n);
  return copy;
}

}  // namespace

F32Image::F32Image(const TensorView& x, Use use) : x_(x), use_(use) {
  if (x.dtype == DType::kF32) {
    data_ = x.data_as<float>();
    return;
  }
  const int64_t n = x.numel();
  copy_ = Take(static_cast<size_t>(n));
  data_ = copy_.data();
  if (use != Use::kWrite) VectorCastBf16ToF32(x.data_as<const uint16_t>(), data_, n);
}

F32Image::~F32Image() {
  if (copy_.capacity() > 0) Pool().push_back(std::move(copy_));
}

void F32Image::Store() const {
  if (x_.dtype != DType::kF32 && use_ != Use::kRead) {
    VectorCastF32ToBf16(data_, x_.data_as<uint16_t>(), x_.numel());
  }
}

}  // namespace titan
