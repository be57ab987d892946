// The `cp` parallel plugin (dimension cp): context parallelism. It replaces the model's attention
// (titan/attention.h) with its own: each cp rank keeps two mirrored chunks of every sequence
// (chunks.h) and attention reaches the other ranks' keys and values, all-gathered
// (allgather_attention.h) or passed around the ring (ring_attention.h), as
// context_parallel_rotate_method says. The model knows no cp: it keeps the tokens and positions
// the attention's layout gives it. The gradients of the parameters, replicated across cp, are
// averaged over the cp ranks by the train step.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "plugins/parallel/cp/allgather_attention.h"
#include "plugins/parallel/cp/ring_attention.h"
#include "titan/parallel.h"

namespace titan::cp {
namespace {

class ContextParallel : public ParallelPlugin, public UnshardingRole {
 public:
  MeshDim dimension() const override { return MeshDim::kCp; }

  absl::Status Configure(const ConfigView& config) override {
    if (!config.Has("context_parallel_rotate_method")) return absl::OkStatus();
    TITAN_ASSIGN_OR_RETURN(std::string method, config.GetString("context_parallel_rotate_method"));
    if (method != "allgather" && method != "alltoall") {
      return config.Error("context_parallel_rotate_method",
                          absl::StrCat("\"", method, "\": expected \"allgather\" or \"alltoall\""));
    }
    ring_ = method == "alltoall";
    return absl::OkStatus();
  }

  absl::Status Apply(Module& model, DeviceMesh& mesh) override {
    if (host_ != nullptr) return absl::FailedPreconditionError("cp: applied twice");
    host_ = model.attention_host();
    if (host_ == nullptr) {
      return absl::FailedPreconditionError(
          "cp: the model offers no AttentionHost, so its attention cannot be replaced");
    }
    Communicator& group = mesh.group(MeshDim::kCp);
    if (group.size() == 1) return absl::OkStatus();  // whole sequences: the model's own
    if (mesh.device().compute() == nullptr) {
      return absl::FailedPreconditionError("cp: the mesh's device has no compute kernels");
    }
    if (ring_) {
      attention_ = std::make_unique<RingAttention>(group, mesh.device());
    } else {
      attention_ = std::make_unique<AllGatherAttention>(group, mesh.device());
    }
    return host_->SetAttention(attention_.get());
  }

  UnshardingRole* unsharding() override { return this; }

  // Whole sequences again on every rank (for generation after training).
  absl::Status Unshard() override {
    if (host_ == nullptr) return absl::OkStatus();
    return host_->SetAttention(nullptr);
  }

 private:
  bool ring_ = false;  // "alltoall": the ring; "allgather" (the default): all-gathered
  AttentionHost* host_ = nullptr;
  std::unique_ptr<ContextAttention> attention_;  // the model computes through it once applied
};

}  // namespace
}  // namespace titan::cp

TITAN_PLUGIN(titan::ParallelPlugin, titan::cp::ContextParallel, "cp", "1.0.0",
             "context parallel: sequences split over the cp ranks with causal load balancing, "
             "attention over all-gathered keys and values or a ring passing them on")
