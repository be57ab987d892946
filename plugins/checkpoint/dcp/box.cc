#include "plugins/checkpoint/dcp/box.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "titan/float16.h"

namespace titan::dcp {
namespace {

bool IsFloat(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16;
}

// Row-major strides of `shape`, in elements.
std::vector<int64_t> Strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

}  // namespace

int64_t Box::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

absl::Status CheckInside(const Box& box, const std::vector<int64_t>& full_shape) {
  bool inside = box.offset.size() == full_shape.size() && box.shape.size() == full_shape.size();
  for (size_t d = 0; inside && d < full_shape.size(); ++d) {
    // Without forming offset + shape, which a damaged index can overflow.
    inside = box.offset[d] >= 0 && box.shape[d] >= 0 && box.offset[d] <= full_shape[d] &&
             box.shape[d] <= full_shape[d] - box.offset[d];
  }
  if (inside) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("a piece at offset [", absl::StrJoin(box.offset, ", "), "] of shape [",
                   absl::StrJoin(box.shape, ", "), "] does not fit the tensor's shape [",
                   absl::StrJoin(full_shape, ", "), "]"));
}

bool Overlaps(const Box& a, const Box& b) {
  for (size_t d = 0; d < a.shape.size(); ++d) {
    if (std::max(a.offset[d], b.offset[d]) >=
        std::min(a.offset[d] + a.shape[d], b.offset[d] + b.shape[d])) {
      return false;
    }
  }
  return true;
}

bool CanConvert(DType from, DType to) { return from == to || (IsFloat(from) && IsFloat(to)); }

int64_t CopyOverlap(const Box& src, const void* src_data, DType src_dtype, const Box& dst,
                    void* dst_data, DType dst_dtype) {
  const size_t rank = dst.shape.size();
  std::vector<int64_t> low(rank), high(rank);
  for (size_t d = 0; d < rank; ++d) {
    low[d] = std::max(src.offset[d], dst.offset[d]);
    high[d] = std::min(src.offset[d] + src.shape[d], dst.offset[d] + dst.shape[d]);
    if (low[d] >= high[d]) return 0;
  }
  if (rank == 0) {  // scalars
    std::memcpy(dst_data, src_data, DTypeSize(dst_dtype));
    return 1;
  }
  const std::vector<int64_t> src_strides = Strides(src.shape), dst_strides = Strides(dst.shape);
  const int64_t run = high[rank - 1] - low[rank - 1];  // contiguous along the last dimension
  const size_t src_size = DTypeSize(src_dtype), dst_size = DTypeSize(dst_dtype);
  int64_t copied = 0;
  std::vector<int64_t> index(low);  // walks the overlap's rows, last dimension fixed at low
  for (;;) {
    int64_t s = 0, t = 0;
    for (size_t d = 0; d < rank; ++d) {
      s += (index[d] - src.offset[d]) * src_strides[d];
      t += (index[d] - dst.offset[d]) * dst_strides[d];
    }
    if (src_dtype == dst_dtype) {
      std::memcpy(static_cast<char*>(dst_data) + t * dst_size,
                  static_cast<const char*>(src_data) + s * src_size, run * src_size);
    } else {
      for (int64_t i = 0; i < run; ++i)
        StoreF32(dst_data, dst_dtype, t + i, LoadAsF32(src_data, src_dtype, s + i));
    }
    copied += run;
    size_t d = rank - 1;  // the next row: count up the leading dimensions like an odometer
    for (;;) {
      if (d == 0) return copied;
      --d;
      if (++index[d] < high[d]) break;
      index[d] = low[d];
    }
  }
}

}  // namespace titan::dcp
