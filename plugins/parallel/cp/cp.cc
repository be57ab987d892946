// The `cp` parallel plugin (dimension cp): context parallelism. Like tp, it is a layout the
// model learns (titan/module.h's ContextParallelTarget): each cp rank keeps two mirrored chunks
// of every sequence and attention reaches the other ranks' keys and values, all-gathered or
// passed around the ring (context_parallel_rotate_method). The gradients of
// the parameters, replicated across cp, are averaged over the cp ranks by the train step.
#include "absl/strings/str_cat.h"
#include "titan/parallel.h"

namespace titan::cp {
namespace {

class ContextParallel : public ParallelPlugin {
 public:
  MeshDim dimension() const override { return MeshDim::kCp; }

  absl::Status Configure(const ConfigView& config) override {
    if (!config.Has("context_parallel_rotate_method")) return absl::OkStatus();
    TITAN_ASSIGN_OR_RETURN(std::string method, config.GetString("context_parallel_rotate_method"));
    if (method == "allgather") {
      rotate_ = ContextParallelRotate::kAllGather;
    } else if (method == "alltoall") {
      rotate_ = ContextParallelRotate::kRing;
    } else {
      return config.Error("context_parallel_rotate_method",
                          absl::StrCat("\"", method, "\": expected \"allgather\" or \"alltoall\""));
    }
    return absl::OkStatus();
  }

  absl::Status Apply(Module& model, DeviceMesh& mesh) override {
    if (group_ != nullptr) return absl::FailedPreconditionError("cp: applied twice");
    target_ = model.context_parallel_target();
    if (target_ == nullptr) {
      return absl::FailedPreconditionError(
          "cp: the model offers no ContextParallelTarget, so it cannot split its sequences");
    }
    group_ = &mesh.group(MeshDim::kCp);
    return target_->SetContextParallel(ContextParallelLayout{group_, rotate_});
  }

  // Whole sequences again on every rank (for generation after training).
  absl::Status Unshard() override {
    if (target_ == nullptr) return absl::OkStatus();
    return target_->SetContextParallel(ContextParallelLayout{});
  }

 private:
  Communicator* group_ = nullptr;
  ContextParallelTarget* target_ = nullptr;
  ContextParallelRotate rotate_ = ContextParallelRotate::kAllGather;
};

}  // namespace
}  // namespace titan::cp

TITAN_PLUGIN(titan::ParallelPlugin, titan::cp::ContextParallel, "cp", "1.0.0",
             "context parallel: sequences split over the cp ranks with causal load balancing, "
             "attention over all-gathered keys and values or a ring passing them on")
