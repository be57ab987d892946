// Parameters and the module tree that parallelism plugins walk and transform.
#ifndef TITAN_MODULE_H_
#define TITAN_MODULE_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "titan/attention.h"
#include "titan/device_mesh.h"
#include "titan/pipeline.h"
#include "titan/status.h"
#include "titan/tensor_parallel_overlap.h"
#include "titan/tensor_view.h"

namespace titan {

// How a parameter is laid out along one mesh dimension.
struct Placement {
  // kShard splits tensor_dim evenly across the mesh dimension; kFlatShard gives each rank a
  // contiguous run of the row-major elements (Parameter::shard says which).
  enum class Kind : uint8_t { kReplicate, kShard, kFlatShard };
  Kind kind = Kind::kReplicate;
  int tensor_dim = 0;  // the tensor dimension split across the mesh dimension, for kShard
};

// How tensor parallelism splits a parameter (TorchTitan's ParallelStyles), declared by the
// module that creates it; the tp plugin shards by this alone, knowing no model's names.
enum class TensorParallelStyle : uint8_t {
  kUndeclared,  // the module said nothing: the tp plugin refuses the model
  kReplicate,   // whole on every tp rank (a norm, which sequence parallel runs on its tokens)
  kColumnwise,  // a linear's [out, in] weight split along dim 0, its output features
  kRowwise,     // a linear's [out, in] weight split along dim 1, its input features
  kVocabParallelEmbedding,  // an embedding's [vocab, dim] table split along dim 0, its rows
};

struct Parameter {
  std::string name;                 // fully qualified, e.g. "layers.3.attention.wq.weight"
  std::vector<int64_t> full_shape;  // the logical shape, before any sharding
  TensorParallelStyle tp_style = TensorParallelStyle::kUndeclared;
  // What the module computes with: this rank's piece along the tensor-parallel dimensions. A
  // plugin that keeps parameters sharded (fsdp) points these at gathered storage before the
  // module runs and may set them to null in between.
  TensorView value;
  TensorView grad;  // same shape as value; the module accumulates into it
  // Where value's box starts in the logical tensor, per dimension, when tensor parallelism
  // keeps a slice of it (value.shape is the box's extent); empty means the whole tensor.
  std::vector<int64_t> local_offset;
  std::array<Placement, kMeshDims> placements;  // one per MeshDim with ranks (not kEp)
  bool weight_decay = true;
  // The routed experts' weight of a mixture of experts, [experts, ...]: expert parallelism keeps
  // this rank's experts, a run of dim 0 (local_offset[0] says from which), and fsdp shards it over
  // the ranks holding the same experts (DeviceMesh::expert_shard_group).
  bool expert = false;
  // With flat sharding (fsdp): this rank's contiguous run of value's row-major elements, from
  // element shard_offset on, and its gradient. Empty when the parameter is not sharded so.
  TensorView shard;
  TensorView shard_grad;
  int64_t shard_offset = 0;
  // The format the module computes with this parameter in, set by the module (f32 unless told):
  //   kF32:    value itself;
  //   kBF16:   value rounded to bf16 (a matmul weight under bf16 mixed precision);
  //   kF8E4M3: value quantized to e4m3 with one scale from the amax of the whole parameter (a
  //            Float8 linear's weight under tensorwise scaling, with float8 all-gather on).
  // A plugin that gathers the parameter (fsdp) may hand it over already in that format, which
  // shrinks the gathered bytes: it points `compute` at the values (f8e4m3 codes with
  // `compute_inverse_scale`, f32 [1], for kF8E4M3) and may leave value null. The module
  // computes from `compute` when it is set and converts value itself otherwise; both give the
  // same numbers.
  DType compute_dtype = DType::kF32;
  TensorView compute;
  TensorView compute_inverse_scale;
};

// Called around a module's forward and backward; parallel plugins use these to gather
// parameters before use and reduce gradients after.
class ModuleHooks {
 public:
  virtual ~ModuleHooks() = default;
  virtual absl::Status BeforeForward() { return absl::OkStatus(); }
  virtual absl::Status AfterForward() { return absl::OkStatus(); }
  virtual absl::Status BeforeBackward() { return absl::OkStatus(); }
  virtual absl::Status AfterBackward() { return absl::OkStatus(); }
};

// How a model computes under tensor parallelism, each parameter split as its tp_style says:
// column-parallel projections over heads and hidden features, row-parallel ones back into the
// residual stream, sequence parallel for the norms and the residual, vocabulary-parallel
// embedding and output (TorchTitan's Llama plan, for Llama).
struct TensorParallelLayout {
  Communicator* group = nullptr;  // the tp ranks; null (or one rank): no tensor parallelism
  bool loss_parallel = true;      // the loss over vocabulary shards, never the whole logits
  // Async tensor parallelism's ring (titan/tensor_parallel_overlap.h); null: the collectives
  // run synchronously.
  TensorParallelOverlap* overlap = nullptr;
};

// A model that can compute tensor-parallel. The tp plugin shards the parameters first by their
// declared tp_style (each Parameter's value and grad narrowed to this rank's box, placements[kTp]
// saying along which tensor dimension), then tells the model the layout, which checks that its
// shapes divide and that every parameter holds the box it expects, and from then on computes with
// its local heads, features and vocabulary rows. Setting a layout without a group restores whole
// parameters.
class TensorParallelTarget {
 public:
  virtual ~TensorParallelTarget() = default;
  // Whether the model's heads, features and vocabulary divide among `degree` ranks; an error
  // names the model's numbers. The tp plugin asks before it shards anything.
  virtual absl::Status CheckTensorParallelDegree(int degree) const = 0;
  virtual absl::Status SetTensorParallel(const TensorParallelLayout& layout) = 0;
};

// How a mixture of experts computes under expert parallelism: the ep ranks hold `experts / degree`
// routed experts each, rank r those from r x that on; tokens travel to their experts' rank and
// back by all-to-all.
struct ExpertParallelLayout {
  Communicator* group = nullptr;  // the ep ranks; null (or one rank): every expert here
};

// A model with routed experts that can compute expert-parallel. The ep plugin narrows each
// expert parameter (Parameter::expert) to this rank's experts first, then tells the model the
// layout, which checks that every such parameter holds the run it expects. Setting a layout
// without a group restores whole experts.
class ExpertParallelTarget {
 public:
  virtual ~ExpertParallelTarget() = default;
  // Whether the model's experts divide among `degree` ranks; an error names its numbers.
  virtual absl::Status CheckExpertParallelDegree(int degree) const = 0;
  virtual absl::Status SetExpertParallel(const ExpertParallelLayout& layout) = 0;
};

class Module {
 public:
  virtual ~Module() = default;
  virtual const std::string& name() const = 0;
  virtual std::vector<Parameter*> parameters() = 0;  // this module's own, not its children's
  virtual std::vector<Module*> children() = 0;
  // The module keeps the hooks alive; hooks run in the order they were added.
  virtual void AddHooks(std::unique_ptr<ModuleHooks> hooks) = 0;
  // The model behind a root module that can compute tensor-parallel; null otherwise. The model's
  // forward is monolithic, so tensor parallelism is a layout it learns, not modules swapped in.
  virtual TensorParallelTarget* tensor_parallel_target() { return nullptr; }
  // The model behind a root module that runs pipeline stages (titan/pipeline.h); null otherwise.
  virtual PipelineStageTarget* pipeline_stage_target() { return nullptr; }
  // The model behind a root module whose attention a plugin can replace (titan/attention.h:
  // context parallel's); null otherwise.
  virtual AttentionHost* attention_host() { return nullptr; }
  // The model behind a root module with routed experts; null otherwise.
  virtual ExpertParallelTarget* expert_parallel_target() { return nullptr; }
};

}  // namespace titan

#endif  // TITAN_MODULE_H_
