// This rank's boxes of the parameters under tensor parallelism, kept in flat buffers the
// optimizer can update in one pass. Each parameter's declared style (Parameter::tp_style, which
// the model sets where it creates its parameters) says which tensor dimension the tp ranks split,
// a parameter being a vector, a matrix [out, in] or a stack of matrices [experts, out, in]:
//   kColumnwise: the output features (heads, hidden features, vocabulary rows), dim 0 of a matrix;
//   kRowwise: the input features, the last dim;
//   kVocabParallelEmbedding: dim 0 (vocabulary rows; tokens a rank lacks look up zeros);
//   kReplicate: none (sequence parallel runs a norm on each rank's run of the tokens).
// No model's names appear here: any model family that declares its styles shards the same way.
#ifndef TITAN_PLUGINS_PARALLEL_TP_TP_SHARDS_H_
#define TITAN_PLUGINS_PARALLEL_TP_TP_SHARDS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "titan/communicator.h"
#include "titan/device.h"
#include "titan/module.h"
#include "titan/optimizer.h"

namespace titan::tp {

inline constexpr int kReplicated = -1;

// The tensor dimension a parameter of this style and `rank` dimensions is split along, or
// kReplicated; nullopt for kUndeclared.
std::optional<int> SplitDim(TensorParallelStyle style, int rank);

class TpShards {
 public:
  // Buffers live on `device`, which must have a compute; it outlives this object.
  explicit TpShards(DevicePlugin& device) : device_(device), compute_(*device.compute()) {}

  // Copies rank `rank` of `degree`'s box of every parameter (whole, with values) into this
  // object's buffers and narrows each parameter's value and grad to it, setting local_offset and
  // placements[kTp]. An undeclared style or an uneven split is an error naming the parameter.
  absl::Status Shard(const std::vector<Parameter*>& parameters, int degree, int rank);
  // Gathers every parameter whole from the group's boxes into new buffers and points value and
  // grad (zeroed) at them. Collective over `group`.
  absl::Status Unshard(Communicator& group);

  TensorView values() const { return local_.view(); }
  TensorView grads() const { return local_grad_.view(); }
  const std::vector<ParamSegment>& segments() const { return segments_; }

 private:
  struct Entry {
    Parameter* p;
    int dim;         // kReplicated or the split tensor dimension
    int64_t offset;  // in the flat buffers
  };
  // Copies the box of `full` (row-major, of full_shape) that rank `rank` of `degree` holds along
  // `dim` (or all of it, kReplicated) into `box`, or back (to_box false) into `full`.
  absl::Status CopyBox(float* full, float* box, const std::vector<int64_t>& full_shape, int dim,
                       int rank, int degree, bool to_box) const;
  TensorView View(float* data, std::vector<int64_t> shape) const {
    return TensorView{data, DType::kF32, compute_.device(), std::move(shape), {}};
  }

  DevicePlugin& device_;
  Compute& compute_;
  std::vector<Entry> entries_;
  DeviceBuffer local_, local_grad_;
  std::vector<ParamSegment> segments_;
  std::vector<DeviceBuffer> whole_;  // after Unshard: each value and grad, whole
};

}  // namespace titan::tp

#endif  // TITAN_PLUGINS_PARALLEL_TP_TP_SHARDS_H_
