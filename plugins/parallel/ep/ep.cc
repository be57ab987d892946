// The `ep` parallel plugin: TorchTitan's expert parallelism. Its ranks are borrowed from
// dp_shard x cp (DeviceMesh::group(kEp), runs of ep consecutive ranks): each holds experts / ep of
// every mixture of experts' routed experts, the tokens travelling to their experts and back by
// all-to-all (the model runs that, core/model/modules/moe_feed_forward.cc). Apply narrows each
// expert weight (Parameter::expert, [experts, ...]) to this rank's run of dim 0, in place: a run
// of dim 0 is contiguous, so fsdp, which must follow, shards it further over the ranks holding the
// same experts (DeviceMesh::expert_shard_group) and the model's whole copy is released. Under
// tensor parallelism, applied before, each expert weight is already this tp rank's part of every
// expert's matrix (dim 1 or 2), and ep narrows that. Its checkpoint pieces are boxes at
// local_offset, so a checkpoint loads at any ep degree.
#include <vector>

#include "absl/strings/str_cat.h"
#include "titan/parallel.h"

namespace titan::ep {
namespace {

void CollectExperts(Module& module, std::vector<Parameter*>& out) {
  for (Parameter* p : module.parameters()) {
    if (p->expert) out.push_back(p);
  }
  for (Module* child : module.children()) CollectExperts(*child, out);
}

// Dim 0's run [first, first + count) of a contiguous row-major view.
TensorView Run(const TensorView& whole, int64_t first, int64_t count) {
  int64_t inner = 1;
  for (size_t d = 1; d < whole.shape.size(); ++d) inner *= whole.shape[d];
  TensorView run = whole;
  run.data =
      static_cast<char*>(whole.data) + static_cast<size_t>(first * inner) * DTypeSize(whole.dtype);
  run.shape[0] = count;
  run.strides.clear();
  return run;
}

class ExpertParallel : public ParallelPlugin, public UnshardingRole {
 public:
  MeshDim dimension() const override { return MeshDim::kEp; }

  absl::Status Apply(Module& model, DeviceMesh& mesh) override {
    if (group_ != nullptr) return absl::FailedPreconditionError("ep: applied twice");
    target_ = model.expert_parallel_target();
    if (target_ == nullptr) {
      return absl::FailedPreconditionError(
          "ep: the model has no routed experts (no ExpertParallelTarget) to split");
    }
    Communicator& group = mesh.group(MeshDim::kEp);
    TITAN_RETURN_IF_ERROR(target_->CheckExpertParallelDegree(group.size()));
    CollectExperts(model, experts_);
    for (Parameter* p : experts_) {
      if (p->value.data == nullptr || !p->value.is_contiguous() || p->value.shape.empty() ||
          p->value.shape[0] != p->full_shape[0] || p->value.shape[0] % group.size() != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("ep: expert parameter ", p->name, " must be contiguous and hold all its ",
                         "experts along dim 0, a multiple of ", group.size()));
      }
      const int64_t local = p->value.shape[0] / group.size(), first = group.rank() * local;
      p->value = Run(p->value, first, local);
      p->grad = Run(p->grad, first, local);
      if (p->local_offset.empty()) p->local_offset.assign(p->full_shape.size(), 0);
      p->local_offset[0] = first;
    }
    group_ = &group;
    mesh_ = &mesh;
    return target_->SetExpertParallel(ExpertParallelLayout{group_});
  }

  UnshardingRole* unsharding() override { return this; }

  // After fsdp's: each expert weight's run is whole on this rank; the runs are gathered into
  // weights of this plugin's holding every expert (and, under tensor parallelism, still this tp
  // rank's part of each, which tp's Unshard gathers next).
  absl::Status Unshard() override {
    if (group_ == nullptr) return absl::OkStatus();
    DevicePlugin& device = mesh_->device();
    for (Parameter* p : experts_) {
      if (p->value.data == nullptr) {
        return absl::FailedPreconditionError(
            absl::StrCat("ep: unsharding ", p->name, ", which the plugins after ep left sharded"));
      }
      std::vector<int64_t> shape = p->value.shape;
      shape[0] = p->full_shape[0];
      TITAN_ASSIGN_OR_RETURN(DeviceBuffer value, DeviceBuffer::Allocate(device, Numel(shape)));
      TITAN_ASSIGN_OR_RETURN(DeviceBuffer grad, DeviceBuffer::Allocate(device, Numel(shape)));
      TensorView whole = value.view();
      whole.shape = shape;
      TITAN_RETURN_IF_ERROR(group_->AllGather(p->value, whole));
      TensorView whole_grad = grad.view();
      whole_grad.shape = shape;
      p->value = whole;
      p->grad = whole_grad;
      if (!p->local_offset.empty()) p->local_offset[0] = 0;
      if (shape == p->full_shape) p->local_offset.clear();
      whole_.push_back(std::move(value));
      whole_.push_back(std::move(grad));
    }
    group_ = nullptr;
    return target_->SetExpertParallel(ExpertParallelLayout{});
  }

 private:
  static int64_t Numel(const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (int64_t extent : shape) n *= extent;
    return n;
  }

  Communicator* group_ = nullptr;
  DeviceMesh* mesh_ = nullptr;
  ExpertParallelTarget* target_ = nullptr;
  std::vector<Parameter*> experts_;
  std::vector<DeviceBuffer> whole_;  // after Unshard: each expert weight's value and grad, whole
};

}  // namespace
}  // namespace titan::ep

TITAN_PLUGIN(titan::ParallelPlugin, titan::ep::ExpertParallel, "ep", "1.0.0",
             "expert parallel: routed experts split over ranks borrowed from dp_shard x cp (ep)")
