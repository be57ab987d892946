// The `tp` parallel plugin (dimension tp): TorchTitan's tensor parallelism, with sequence
// parallel and the vocabulary-parallel (loss-parallel) output. Apply shards the parameters by
// the style each one's module declared (Parameter::tp_style, tp_shards.h) into this plugin's
// flat buffers, which the optimizer updates unless fsdp, applied after, shards them further;
// then it hands the model the tp group through TensorParallelTarget, and the model runs the
// communication (core/model/tensor_parallel.h). Our model is one forward function, not a tree
// of linears to swap, so what changes hands is the layout. With
// parallelism.enable_async_tensor_parallel the layout carries this plugin's ring (tp_ring.h),
// through which the model overlaps the sequence-parallel collectives with its matmuls.
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugins/parallel/tp/tp_ring.h"
#include "plugins/parallel/tp/tp_shards.h"
#include "titan/parallel.h"

namespace titan::tp {
namespace {

void CollectParameters(Module& module, std::vector<Parameter*>& out) {
  for (Parameter* p : module.parameters()) out.push_back(p);
  for (Module* child : module.children()) CollectParameters(*child, out);
}

class TensorParallel : public ParallelPlugin, public ParameterShardsRole, public UnshardingRole {
 public:
  MeshDim dimension() const override { return MeshDim::kTp; }

  absl::Status Configure(const ConfigView& config) override {
    if (config.Has("enable_async_tensor_parallel")) {
      TITAN_ASSIGN_OR_RETURN(async_, config.GetBool("enable_async_tensor_parallel"));
    }
    if (!config.Has("disable_loss_parallel")) return absl::OkStatus();
    TITAN_ASSIGN_OR_RETURN(bool gather_logits, config.GetBool("disable_loss_parallel"));
    if (gather_logits) {
      return config.Error("disable_loss_parallel",
                          "expected false: the tp plugin computes the loss vocabulary-parallel "
                          "only (gathering the logits is not implemented)");
    }
    return absl::OkStatus();
  }

  absl::Status Apply(Module& model, DeviceMesh& mesh) override {
    if (group_ != nullptr) return absl::FailedPreconditionError("tp: applied twice");
    target_ = model.tensor_parallel_target();
    if (target_ == nullptr) {
      return absl::FailedPreconditionError(
          "tp: the model offers no TensorParallelTarget, so it cannot compute tensor-parallel");
    }
    Communicator& group = mesh.group(MeshDim::kTp);
    TITAN_RETURN_IF_ERROR(target_->CheckTensorParallelDegree(group.size()));
    std::vector<Parameter*> parameters;
    CollectParameters(model, parameters);
    if (mesh.device().compute() == nullptr) {
      return absl::FailedPreconditionError("tp: the mesh's device has no compute kernels");
    }
    shards_.emplace(mesh.device());
    TITAN_RETURN_IF_ERROR(shards_->Shard(parameters, group.size(), group.rank()));
    group_ = &group;
    if (async_ && group.size() > 1) ring_ = std::make_unique<TpRing>(group, mesh.device());
    return target_->SetTensorParallel(TensorParallelLayout{group_, true, ring_.get()});
  }

  ParameterShardsRole* parameter_shards() override { return this; }
  UnshardingRole* unsharding() override { return this; }

  absl::Status Unshard() override {
    if (group_ == nullptr) return absl::OkStatus();
    TITAN_RETURN_IF_ERROR(shards_->Unshard(*group_));
    return target_->SetTensorParallel(TensorParallelLayout{});
  }

  std::optional<LocalParameters> local_parameters() override {
    if (!shards_) return std::nullopt;
    return LocalParameters{shards_->values(), shards_->grads(), shards_->segments()};
  }
  // The split parameters' squared norms add up across the group; the replicated ones
  // (placements[kTp] kReplicate) sit on every rank, which the gradient norm accounts for.
  Communicator* gradient_shard_group() override { return group_; }

 private:
  Communicator* group_ = nullptr;
  TensorParallelTarget* target_ = nullptr;
  std::optional<TpShards> shards_;  // once applied
  bool async_ = false;              // parallelism.enable_async_tensor_parallel
  std::unique_ptr<TpRing> ring_;    // with async_, on more than one rank
};

}  // namespace
}  // namespace titan::tp

TITAN_PLUGIN(titan::ParallelPlugin, titan::tp::TensorParallel, "tp", "1.0.0",
             "tensor parallel with sequence parallel and a vocabulary-parallel loss (tp)")
