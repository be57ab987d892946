// The `ddp` parallel plugin (dp_replicate without dp_shard, as TorchTitan applies DDP): every
// rank keeps all parameters, and each module's gradients form one bucket that is all-reduced
// (averaged) on the communication stream as soon as the module's backward has produced it, while
// the backward of the modules before it runs. Under gradient accumulation only the last
// microbatch's backward reduces (the others accumulate locally, as DDP's no_sync does).
#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugins/parallel/common/comm_stream.h"
#include "titan/parallel.h"

namespace titan::ddp {
namespace {

// A module's gradients as runs of contiguous memory (on the gradients' device): one all-reduce
// per run.
std::vector<TensorView> Bucket(const std::vector<Parameter*>& parameters) {
  const Device device = parameters.empty() ? Device{} : parameters.front()->grad.device;
  std::vector<std::pair<float*, int64_t>> pieces;
  for (const Parameter* p : parameters)
    pieces.emplace_back(p->grad.data_as<float>(), p->grad.numel());
  std::sort(pieces.begin(), pieces.end());
  std::vector<TensorView> runs;
  float* begin = nullptr;
  int64_t count = 0;
  for (const auto& [data, n] : pieces) {
    if (begin != nullptr && data == begin + count) {
      count += n;
      continue;
    }
    if (begin != nullptr) runs.push_back(FlatF32(begin, count, device));
    begin = data, count = n;
  }
  if (begin != nullptr) runs.push_back(FlatF32(begin, count, device));
  return runs;
}

class Ddp : public ParallelPlugin, public DataParallelRole {
 public:
  MeshDim dimension() const override { return MeshDim::kDpReplicate; }

  absl::Status Apply(Module& model, DeviceMesh& mesh) override;

  DataParallelRole* data_parallel() override { return this; }

  void set_requires_gradient_sync(bool sync) override { sync_ = sync; }

  absl::Status WaitForGradients() override {
    absl::Status first = absl::OkStatus();
    for (const auto& reduction : reductions_) first.Update(reduction.get());
    reductions_.clear();
    return first;
  }

  absl::Status ReduceBucket(const std::vector<TensorView>& bucket) {
    if (!sync_) return absl::OkStatus();
    reductions_.push_back(stream_.Enqueue([this, bucket] {
      for (const TensorView& run : bucket) {
        TITAN_RETURN_IF_ERROR(group_->AllReduce(run, ReduceOp::kAvg));
      }
      return absl::OkStatus();
    }));
    return absl::OkStatus();
  }

 private:
  Communicator* group_ = nullptr;
  bool sync_ = true;
  std::vector<std::shared_future<absl::Status>> reductions_;
  parallel::CommStream stream_;  // last: its thread stops before what it uses goes
};

class BucketHooks : public ModuleHooks {
 public:
  BucketHooks(Ddp& ddp, std::vector<TensorView> bucket) : ddp_(ddp), bucket_(std::move(bucket)) {}
  absl::Status AfterBackward() override { return ddp_.ReduceBucket(bucket_); }

 private:
  Ddp& ddp_;
  std::vector<TensorView> bucket_;
};

absl::Status Ddp::Apply(Module& model, DeviceMesh& mesh) {
  if (group_ != nullptr) return absl::FailedPreconditionError("ddp: applied twice");
  if (mesh.shape().degree(MeshDim::kDpShard) > 1) {
    return absl::InvalidArgumentError(
        "ddp: dp_shard > 1 is HSDP, which the fsdp plugin implements; apply fsdp instead");
  }
  // Over dp_replicate flattened with cp: one all-reduce averages the cp ranks' gradients too.
  group_ = &mesh.group_with_context(MeshDim::kDpReplicate);
  std::vector<Module*> modules = {&model};
  for (Module* child : model.children()) modules.push_back(child);
  for (Module* module : modules) {
    std::vector<Parameter*> parameters = module->parameters();
    for (const Parameter* p : parameters) {
      if (p->grad.data == nullptr || p->grad.dtype != DType::kF32 || !p->grad.is_contiguous()) {
        return absl::InvalidArgumentError(
            absl::StrCat("ddp: parameter ", p->name, " must have a contiguous f32 gradient"));
      }
    }
    module->AddHooks(std::make_unique<BucketHooks>(*this, Bucket(parameters)));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace titan::ddp

TITAN_PLUGIN(titan::ParallelPlugin, titan::ddp::Ddp, "ddp", "1.0.0",
             "data parallel replicas: gradient buckets all-reduced during backward")
