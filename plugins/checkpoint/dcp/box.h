// Pieces of one logical tensor as boxes (an offset and an extent per dimension), and the copy
// of the elements two boxes share, converting between f32, bf16 and f16 on the way.
#ifndef TITAN_PLUGINS_CHECKPOINT_DCP_BOX_H_
#define TITAN_PLUGINS_CHECKPOINT_DCP_BOX_H_

#include <cstdint>
#include <vector>

#include "titan/status.h"
#include "titan/tensor_view.h"

namespace titan::dcp {

struct Box {
  std::vector<int64_t> offset;
  std::vector<int64_t> shape;
  int64_t numel() const;
};

// Whether `box` lies inside a tensor of `full_shape`; the error says how it does not.
absl::Status CheckInside(const Box& box, const std::vector<int64_t>& full_shape);

bool Overlaps(const Box& a, const Box& b);

// Whether both dtypes are among f32, bf16, f16 or they are the same.
bool CanConvert(DType from, DType to);

// Copies the elements `src` and `dst` share from src_data (row-major over src.shape, of
// src_dtype) into dst_data; returns how many it copied (0 when the boxes do not meet).
int64_t CopyOverlap(const Box& src, const void* src_data, DType src_dtype, const Box& dst,
                    void* dst_data, DType dst_dtype);

}  // namespace titan::dcp

#endif  // TITAN_PLUGINS_CHECKPOINT_DCP_BOX_H_
