// The `fsdp` parallel plugin (dp_shard; with dp_replicate > 1 it is HSDP, as TorchTitan applies
// fully_shard on a 2D mesh). Each block, and the root's own parameters, is one FlatUnit. Hooks
// around each unit gather its parameters before forward (prefetching the next unit on the
// communication stream), free them after forward when `reshard_after_forward` says so, gather
// them again before backward, and after backward reduce-scatter the unit's gradients into this
// rank's shard while the backward of the unit before it runs. The optimizer updates only the
// shard.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugins/parallel/common/comm_stream.h"
#include "plugins/parallel/fsdp/flat_unit.h"
#include "titan/parallel.h"

namespace titan::fsdp {
namespace {

class Fsdp;

// The state of one unit between the hooks; only the main thread touches it.
struct Unit {
  Module* module = nullptr;
  std::unique_ptr<FlatUnit> flat;
  bool reshard_after_forward = true;
  DeviceBuffer full;                                          // gathered values, or empty
  std::optional<std::shared_future<absl::Status>> gathering;  // set while a gather is queued
  DeviceBuffer full_grad;                                     // the backward's gradients, or empty
};

class Fsdp : public ParallelPlugin {
 public:
  MeshDim dimension() const override { return MeshDim::kDpShard; }

  absl::Status Configure(const ConfigView& config) override {
    if (config.Has("fsdp_reshard_after_forward")) {
      TITAN_ASSIGN_OR_RETURN(policy_, config.GetString("fsdp_reshard_after_forward"));
    }
    if (policy_ != "default" && policy_ != "always" && policy_ != "never") {
      return config.Error(
          "fsdp_reshard_after_forward",
          absl::StrCat("expected default, always or never, found \"", policy_, "\""));
    }
    return absl::OkStatus();
  }

  absl::Status Apply(Module& model, DeviceMesh& mesh) override;

  absl::Status WaitForGradients() override {
    // The stream runs in order: once a no-op queued now is done, every reduction before it is.
    TITAN_RETURN_IF_ERROR(stream_.Enqueue([] { return absl::OkStatus(); }).get());
    absl::Status first = absl::OkStatus();
    for (const auto& reduction : reductions_) first.Update(reduction.get());
    reductions_.clear();
    // A gather prefetched for a backward that never came (a pipeline stage's backward ends at
    // the embedding, whose unit prefetches the last block) holds the values from before the
    // optimizer step: drop it, so that the next forward gathers the updated ones.
    for (size_t u = 0; u < units_.size(); ++u) {
      Unit& unit = units_[u];
      if (unit.gathering) {
        first.Update(unit.gathering->get());
        unit.gathering.reset();
      }
      Reshard(u);
    }
    return first;
  }

  absl::Status Unshard() override {
    for (size_t u = 0; u < units_.size(); ++u) TITAN_RETURN_IF_ERROR(Gather(u));
    unsharded_for_good_ = true;
    return absl::OkStatus();
  }

  std::optional<LocalParameters> local_parameters() override {
    return LocalParameters{local_.view(), local_grad_.view(), segments_};
  }
  Communicator* gradient_shard_group() override { return shard_group_; }

  // Hook bodies; `u` indexes units_ in forward order (root first, then the blocks).
  absl::Status BeforeForward(size_t u) {
    TITAN_RETURN_IF_ERROR(Gather(u));
    if (u + 1 < units_.size()) return Prefetch(u + 1);
    return absl::OkStatus();
  }
  absl::Status AfterForward(size_t u) {
    if (units_[u].reshard_after_forward) Reshard(u);
    return absl::OkStatus();
  }
  absl::Status BeforeBackward(size_t u) {
    TITAN_RETURN_IF_ERROR(Gather(u));
    Unit& unit = units_[u];
    TITAN_ASSIGN_OR_RETURN(unit.full_grad, pool_.Take(unit.flat->padded_count(), /*zeroed=*/true));
    unit.flat->PointGrads(unit.full_grad.f32());
    // Backward runs the blocks last to first, after the root's head (norm and output).
    const size_t next = u == 0 ? units_.size() - 1 : u - 1;
    if (next > 0) return Prefetch(next);
    return absl::OkStatus();
  }
  absl::Status AfterBackward(size_t u) {
    Unit& unit = units_[u];
    unit.flat->PointGrads(nullptr);
    // The task owns the gradient buffer and hands it back to the pool when reduced.
    std::shared_ptr<DeviceBuffer> full_grad(new DeviceBuffer(std::move(unit.full_grad)),
                                            [this](DeviceBuffer* buffer) {
                                              pool_.Give(std::move(*buffer));
                                              delete buffer;
                                            });
    const FlatUnit* flat = unit.flat.get();
    reductions_.push_back(stream_.Enqueue([this, flat, full_grad] {
      return flat->ReduceGradients(*shard_group_, replica_group_, full_grad->f32(), scratch_.f32(),
                                   local_grad_.f32());
    }));
    Reshard(u);
    return absl::OkStatus();
  }

 private:
  absl::Status Prefetch(size_t u) {
    Unit& unit = units_[u];
    if (unit.full.f32() != nullptr || unit.gathering) return absl::OkStatus();
    TITAN_ASSIGN_OR_RETURN(unit.full, pool_.Take(unit.flat->padded_count(), /*zeroed=*/false));
    const FlatUnit* flat = unit.flat.get();
    float* full = unit.full.f32();
    unit.gathering = stream_.Enqueue(
        [this, flat, full] { return flat->Gather(*shard_group_, local_.f32(), full); });
    return absl::OkStatus();
  }

  // Returns once unit u's values are gathered and the parameters point at them.
  absl::Status Gather(size_t u) {
    TITAN_RETURN_IF_ERROR(Prefetch(u));
    Unit& unit = units_[u];
    if (unit.gathering) {
      absl::Status gathered = unit.gathering->get();
      unit.gathering.reset();
      if (!gathered.ok()) return gathered;
      unit.flat->PointValues(unit.full.f32());
    }
    return absl::OkStatus();
  }

  void Reshard(size_t u) {
    Unit& unit = units_[u];
    if (unsharded_for_good_ || unit.full.f32() == nullptr) return;
    unit.flat->PointValues(nullptr);
    pool_.Give(std::move(unit.full));
  }

  std::string policy_ = "default";
  Communicator* shard_group_ = nullptr;
  Communicator* replica_group_ = nullptr;  // HSDP only
  std::vector<Unit> units_;
  DeviceBuffer local_, local_grad_, scratch_;  // on the mesh's device
  std::vector<ParamSegment> segments_;
  std::vector<std::shared_future<absl::Status>> reductions_;
  BufferPool pool_;
  bool unsharded_for_good_ = false;
  parallel::CommStream stream_;  // last: its thread stops before the buffers it uses go
};

class UnitHooks : public ModuleHooks {
 public:
  UnitHooks(Fsdp& fsdp, size_t unit) : fsdp_(fsdp), unit_(unit) {}
  absl::Status BeforeForward() override { return fsdp_.BeforeForward(unit_); }
  absl::Status AfterForward() override { return fsdp_.AfterForward(unit_); }
  absl::Status BeforeBackward() override { return fsdp_.BeforeBackward(unit_); }
  absl::Status AfterBackward() override { return fsdp_.AfterBackward(unit_); }

 private:
  Fsdp& fsdp_;
  size_t unit_;
};

absl::Status Fsdp::Apply(Module& model, DeviceMesh& mesh) {
  if (!units_.empty()) return absl::FailedPreconditionError("fsdp: applied twice");
  DevicePlugin& device = mesh.device();
  if (device.compute() == nullptr) {
    return absl::FailedPreconditionError("fsdp: the mesh's device has no compute kernels");
  }
  pool_.set_device(device);
  // Over dp_shard flattened with cp (TorchTitan's dp_shard_cp): the cp ranks' gradients are
  // averaged by the same reduce-scatter, and each holds a shard of the parameters.
  shard_group_ = &mesh.group_with_context(MeshDim::kDpShard);
  if (mesh.shape().degree(MeshDim::kDpReplicate) > 1) {
    replica_group_ = &mesh.group(MeshDim::kDpReplicate);
  }
  const int degree = shard_group_->size(), rank = shard_group_->rank();
  std::vector<Module*> modules = {&model};
  for (Module* child : model.children()) modules.push_back(child);
  const size_t blocks = modules.size() - 1;
  int64_t local_count = 0, largest = 0;
  for (size_t u = 0; u < modules.size(); ++u) {
    std::vector<Parameter*> parameters = modules[u]->parameters();
    for (const Parameter* p : parameters) {
      if (p->value.data == nullptr || p->value.dtype != DType::kF32 || !p->value.is_contiguous()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "fsdp: parameter ", p->name, " must be an f32 contiguous tensor with values"));
      }
    }
    Unit unit;
    unit.module = modules[u];
    unit.flat =
        std::make_unique<FlatUnit>(std::move(parameters), degree, rank, local_count, device);
    // TorchTitan's policies: "default" keeps the last block gathered (backward needs it first)
    // and the root too (FSDP2 never reshards the root after forward).
    const bool is_root = u == 0, is_last_block = u == blocks;
    unit.reshard_after_forward =
        policy_ == "always" || (policy_ == "default" && !is_root && !is_last_block);
    local_count += unit.flat->shard_count();
    largest = std::max(largest, unit.flat->shard_count());
    units_.push_back(std::move(unit));
  }
  TITAN_ASSIGN_OR_RETURN(local_, DeviceBuffer::Allocate(device, local_count));
  TITAN_ASSIGN_OR_RETURN(local_grad_, DeviceBuffer::Allocate(device, local_count));
  TITAN_ASSIGN_OR_RETURN(scratch_, DeviceBuffer::Allocate(device, largest));
  for (size_t u = 0; u < units_.size(); ++u) {
    TITAN_RETURN_IF_ERROR(units_[u].flat->Shard(local_.f32(), local_grad_.f32(), segments_));
    units_[u].module->AddHooks(std::make_unique<UnitHooks>(*this, u));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace titan::fsdp

TITAN_PLUGIN(titan::ParallelPlugin, titan::fsdp::Fsdp, "fsdp", "1.0.0",
             "fully sharded data parallel (dp_shard; HSDP with dp_replicate)")
