// An activation operand (f32 or bf16, as the kernel table allows) as the f32 that a kernel written
// for f32 takes: the operand's own memory when it is f32; else a copy holding its values widened
// (unless the kernel only writes it), which Store rounds back into it once (unless the kernel only
// reads it). So a bf16 operand gets the f32 kernel's arithmetic, rounded once, as the table says.
// The copies come from a pool of this thread's earlier ones, so that a step's kernels allocate
// (and fault in) no memory once the first step has grown the pool to its largest operands.
#ifndef TITAN_CORE_CPU_F32_IMAGE_H_
#define TITAN_CORE_CPU_F32_IMAGE_H_

#include <vector>

#include "titan/tensor_view.h"

namespace titan {

class F32Image {
 public:
  enum class Use { kRead, kWrite, kReadWrite };

  F32Image(const TensorView& x, Use use);
  ~F32Image();  // the copy goes back to the pool
  F32Image(const F32Image&) = delete;
  F32Image& operator=(const F32Image&) = delete;

  float* get() const { return data_; }
  // Rounds the copy into the operand when the kernel wrote it; nothing for an f32 operand.
  void Store() const;

 private:
  TensorView x_;
  Use use_;
  std::vector<float> copy_;  // empty for an f32 operand
  float* data_ = nullptr;
};

}  // namespace titan

#endif  // TITAN_CORE_CPU_F32_IMAGE_H_
