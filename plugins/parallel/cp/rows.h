// Copies of token rows between the [batch, rows, width] tensors context parallelism cuts into
// chunks and puts back together, through the device's compute.
#ifndef TITAN_PLUGINS_PARALLEL_CP_ROWS_H_
#define TITAN_PLUGINS_PARALLEL_CP_ROWS_H_

#include <cstdint>

#include "titan/compute.h"
#include "titan/status.h"
#include "titan/tensor_view.h"

namespace titan::cp {

class Rows {
 public:
  explicit Rows(Compute& compute) : compute_(compute) {}

  Compute& compute() const { return compute_; }
  // n floats of device memory from `data` on.
  TensorView View(const float* data, int64_t n) const {
    return TensorView{const_cast<float*>(data), DType::kF32, compute_.device(), {n}, {}};
  }
  absl::Status Zero(float* data, int64_t n) const { return compute_.Fill(View(data, n), 0); }
  // Rows [src_first, src_first + rows) of each batch row of a [batches, src_rows, width] tensor
  // into rows [dst_first, dst_first + rows) of a [batches, dst_rows, width] one, copied or added.
  absl::Status Copy(const float* src, int64_t src_rows, int64_t src_first, float* dst,
                    int64_t dst_rows, int64_t dst_first, int64_t rows, int64_t width,
                    int64_t batches, bool add) const {
    for (int64_t b = 0; b < batches; ++b) {
      const TensorView from = View(src + (b * src_rows + src_first) * width, rows * width);
      const TensorView to = View(dst + (b * dst_rows + dst_first) * width, rows * width);
      TITAN_RETURN_IF_ERROR(add ? compute_.Accumulate(from, to) : compute_.Copy(from, to));
    }
    return absl::OkStatus();
  }

 private:
  Compute& compute_;
};

}  // namespace titan::cp

#endif  // TITAN_PLUGINS_PARALLEL_CP_ROWS_H_
