// The `fsdp` parallel plugin (dp_shard; with dp_replicate > 1 it is HSDP, as TorchTitan applies
// fully_shard on a 2D mesh). Each block, and the root's own parameters, is one FlatUnit. Hooks
// around each unit gather its parameters before forward (prefetching the next unit on the
// communication stream), free them after forward when `reshard_after_forward` says so, gather
// them again before backward (prefetching the unit before it), and after backward
// reduce-scatter the unit's gradients into this rank's shard while the backward of the unit
// before it runs. A prefetch is a started all-gather (Communicator::StartAllGather) that waits
// for an event recorded when it was asked for, before the current unit's kernels: on a device
// it runs while the current unit computes, and the compute stream waits for it only when the
// unit that needs it comes (Gather). On the CPU the communication thread gives the overlap. The
// optimizer updates only the shard. Parameters the model computes with in bf16 or Float8
// (Parameter::compute_dtype) are gathered so, in flat buffers of their own (TorchTitan's
// mixed_precision_param and float8 all-gather): half or a quarter of the f32 bytes. Under expert
// parallelism the routed experts' weights (Parameter::expert), which the ep plugin narrowed to this
// rank's experts, are flat buffers of their own, sharded over the ranks holding the same experts
// (DeviceMesh::expert_shard_group, TorchTitan's efsdp).
#include <algorithm>
#include <atomic>
#include <iterator>
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

// One flat buffer of a unit: its parameters of one gathered format, sharded over `group`.
struct Part {
  std::unique_ptr<FlatUnit> flat;
  Communicator* group = nullptr;
  // The reduced gradients' factor: an expert's gradient sums the tokens of all its ep ranks
  // before the mean over `group` (dp_shard x cp / ep ranks), so 1 / ep makes it the mean over
  // dp_shard x cp that every other parameter's is.
  float gradient_scale = 1.0f;
  DeviceBuffer full;       // gathered values, or empty
  DeviceBuffer full_grad;  // the backward's gradients, or empty
};

// The state of one unit between the hooks; only the main thread touches it.
struct Unit {
  Module* module = nullptr;
  std::vector<Part> parts;  // f32 first, then bf16, then e4m3: those the unit has
  bool reshard_after_forward = true;
  bool gathered = false;
  std::optional<std::shared_future<absl::Status>> gathering;  // set while a gather is queued
  // The gathers started by the communication thread: touched by the main thread only once
  // `gathering` is done.
  std::vector<std::unique_ptr<Communicator::Transfer>> transfers;
};

class Fsdp : public ParallelPlugin,
             public DataParallelRole,
             public ParameterShardsRole,
             public UnshardingRole,
             public Float8GatherRole {
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

  DataParallelRole* data_parallel() override { return this; }
  ParameterShardsRole* parameter_shards() override { return this; }
  UnshardingRole* unsharding() override { return this; }
  Float8GatherRole* float8_gather() override { return this; }

  // Every backward reduce-scatters its gradients into this rank's shard, where the microbatches'
  // add up: the full gradients are freed unit by unit, with nowhere to accumulate them unreduced.
  void set_requires_gradient_sync(bool /*sync*/) override {}

  absl::Status WaitForGradients() override {
    // The stream runs in order: once a no-op queued now is done, every reduction before it is.
    TITAN_RETURN_IF_ERROR(stream_.Enqueue([] { return absl::OkStatus(); }).get());
    absl::Status first = absl::OkStatus();
    for (const auto& reduction : reductions_) first.Update(reduction.get());
    reductions_.clear();
    amax_fresh_ = false;  // the optimizer step that follows changes the parameters
    // A gather prefetched for a backward that never came (a pipeline stage's backward ends at
    // the embedding, whose unit prefetches the last block) holds the values from before the
    // optimizer step: drop it, so that the next forward gathers the updated ones.
    for (size_t u = 0; u < units_.size(); ++u) {
      Unit& unit = units_[u];
      if (unit.gathering) {
        first.Update(unit.gathering->get());
        unit.gathering.reset();
        first.Update(WaitForTransfers(unit));  // before the buffers go back to the pool
      }
      Reshard(u);
    }
    return first;
  }

  absl::Status Unshard() override {
    // For good, in f32: export and text generation read the values themselves.
    TITAN_RETURN_IF_ERROR(WaitForGradients());
    unsharded_for_good_ = true;
    for (size_t u = 0; u < units_.size(); ++u) TITAN_RETURN_IF_ERROR(Gather(u));
    return absl::OkStatus();
  }

  absl::Status PrecomputeFloat8Scales() override {
    std::vector<TensorView> runs;
    for (const Unit& unit : units_) {
      for (const Part& part : unit.parts) {
        if (part.flat->format() != DType::kF8E4M3) continue;
        for (TensorView& run : part.flat->LocalRuns(local_.f32())) runs.push_back(run);
      }
    }
    if (runs.empty()) {
      return absl::FailedPreconditionError(
          "fsdp: no parameter is gathered in float8 (float8.enable_fsdp_float8_all_gather)");
    }
    // After the gathers queued so far, which may still read the amaxes.
    return stream_
        .Enqueue([this, runs] {
          TITAN_RETURN_IF_ERROR(mesh_compute_->AbsMax(runs, amax_.view()));
          for (Communicator* group : AmaxGroups()) {
            TITAN_RETURN_IF_ERROR(group->AllReduce(amax_.view(), ReduceOp::kMax));
          }
          amax_fresh_ = true;
          return absl::OkStatus();
        })
        .get();
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
    for (Part& part : units_[u].parts) {
      TITAN_ASSIGN_OR_RETURN(part.full_grad,
                             pool_.Take(part.flat->padded_count(), /*zeroed=*/true));
      part.flat->PointGrads(part.full_grad.f32());
    }
    // Backward runs the blocks last to first, after the root's head (norm and output).
    const size_t next = u == 0 ? units_.size() - 1 : u - 1;
    if (next > 0) return Prefetch(next);
    return absl::OkStatus();
  }
  absl::Status AfterBackward(size_t u) {
    for (Part& part : units_[u].parts) {
      part.flat->PointGrads(nullptr);
      // The task owns the gradient buffer and hands it back to the pool when reduced.
      std::shared_ptr<DeviceBuffer> full_grad(new DeviceBuffer(std::move(part.full_grad)),
                                              [this](DeviceBuffer* buffer) {
                                                pool_.Give(std::move(*buffer));
                                                delete buffer;
                                              });
      const FlatUnit* flat = part.flat.get();
      Communicator* group = part.group;
      const float scale = part.gradient_scale;
      reductions_.push_back(stream_.Enqueue([this, flat, group, scale, full_grad] {
        return flat->ReduceGradients(*group, replica_group_, full_grad->f32(), scratch_.f32(),
                                     local_grad_.f32(), scale);
      }));
    }
    Reshard(u);
    return absl::OkStatus();
  }

 private:
  absl::Status Prefetch(size_t u) {
    Unit& unit = units_[u];
    if (unit.gathered || unit.gathering) return absl::OkStatus();
    const bool whole_precision = unsharded_for_good_;
    struct PartGather {
      FlatUnit* flat;
      void* full;
      Communicator* group;
    };
    std::vector<PartGather> gathers;
    for (Part& part : unit.parts) {
      TITAN_ASSIGN_OR_RETURN(
          part.full, pool_.Take(part.flat->gathered_floats(whole_precision), /*zeroed=*/false));
      gathers.push_back({part.flat.get(), part.full.f32(), part.group});
    }
    // Every write of the shards (the optimizer step) and every earlier use of the buffers just
    // taken (the units resharded before) is queued by now, the current unit's kernels not yet:
    // the gathers wait for this point alone.
    TITAN_ASSIGN_OR_RETURN(EventHandle written,
                           mesh_compute_->RecordEvent(mesh_compute_->current_stream()));
    unit.gathering = stream_.Enqueue([this, u, gathers, whole_precision, written] {
      absl::Status started = absl::OkStatus();
      for (const auto& [flat, full, group] : gathers) {
        // Without amaxes precomputed for the parameters as they are now, the unit's own.
        if (flat->format() == DType::kF8E4M3 && !whole_precision && !amax_fresh_) {
          started = flat->ReduceAmax(AmaxGroups(), local_.f32());
          if (!started.ok()) break;
        }
        absl::StatusOr<std::unique_ptr<Communicator::Transfer>> gather =
            flat->StartGather(*group, local_.f32(), full, whole_precision, written);
        if (!gather.ok()) {
          started = gather.status();
          break;
        }
        units_[u].transfers.push_back(std::move(*gather));
      }
      // Released on this thread once the gathers are queued behind it: the wait is for the
      // work before the current unit, not for the unit.
      started.Update(mesh_compute_->SynchronizeEvent(written));
      return started;
    });
    return absl::OkStatus();
  }

  // The compute stream waits for the unit's started gathers (the host, for a host communicator,
  // has already).
  static absl::Status WaitForTransfers(Unit& unit) {
    absl::Status first = absl::OkStatus();
    for (const auto& transfer : unit.transfers) first.Update(transfer->Wait());
    unit.transfers.clear();
    return first;
  }

  // Returns once unit u's values are gathered and the parameters point at them.
  absl::Status Gather(size_t u) {
    TITAN_RETURN_IF_ERROR(Prefetch(u));
    Unit& unit = units_[u];
    if (unit.gathering) {
      absl::Status gathered = unit.gathering->get();
      unit.gathering.reset();
      gathered.Update(WaitForTransfers(unit));
      if (!gathered.ok()) return gathered;
      for (Part& part : unit.parts) part.flat->PointValues(part.full.f32(), unsharded_for_good_);
      unit.gathered = true;
    }
    return absl::OkStatus();
  }

  void Reshard(size_t u) {
    Unit& unit = units_[u];
    if (unsharded_for_good_ || !unit.gathered) return;
    for (Part& part : unit.parts) {
      part.flat->PointValues(nullptr, false);
      pool_.Give(std::move(part.full));
    }
    unit.gathered = false;
  }

  // The groups a float8-gathered weight's amax is max-reduced over: the shard group, and under
  // tensor parallelism (every Float8 weight split over tp) the tp group's copy.
  std::vector<Communicator*> AmaxGroups() const {
    if (tp_amax_group_ == nullptr) return {shard_group_};
    return {shard_group_, tp_amax_group_.get()};
  }

  std::string policy_ = "default";
  Compute* mesh_compute_ = nullptr;
  Communicator* shard_group_ = nullptr;
  Communicator* replica_group_ = nullptr;  // HSDP only
  // A copy of the tp group for the amaxes (tp > 1 with float8 gathers only): the stream's thread
  // reduces over it while the model's thread runs tp's own collectives on the original.
  std::unique_ptr<Communicator> tp_amax_group_;
  std::vector<Unit> units_;
  DeviceBuffer local_, local_grad_, scratch_;  // on the mesh's device
  std::vector<ParamSegment> segments_;
  std::vector<std::shared_future<absl::Status>> reductions_;
  BufferPool pool_;
  bool unsharded_for_good_ = false;
  // The amax of each parameter gathered in e4m3, in unit order, and whether it holds those of
  // the parameters as they are now (PrecomputeFloat8Scales; only the stream's thread reads it).
  DeviceBuffer amax_;
  std::atomic<bool> amax_fresh_ = false;
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
  mesh_compute_ = device.compute();
  pool_.set_device(device);
  // Over dp_shard flattened with cp (TorchTitan's dp_shard_cp): the cp ranks' gradients are
  // averaged by the same reduce-scatter, and each holds a shard of the parameters.
  shard_group_ = &mesh.group_with_context(MeshDim::kDpShard);
  if (mesh.shape().degree(MeshDim::kDpReplicate) > 1) {
    replica_group_ = &mesh.group(MeshDim::kDpReplicate);
  }
  // Expert parallelism: the experts' weights apart, over the ranks holding the same experts.
  const int ep = mesh.shape().degree(MeshDim::kEp);
  Communicator* expert_group = ep > 1 ? &mesh.expert_shard_group() : nullptr;
  std::vector<Module*> modules = {&model};
  for (Module* child : model.children()) modules.push_back(child);
  const size_t blocks = modules.size() - 1;
  int64_t local_count = 0, largest = 0, float8_parameters = 0;
  for (size_t u = 0; u < modules.size(); ++u) {
    // The formats a unit gathers in, in its parts' order, and each one's parameters.
    constexpr DType kFormats[] = {DType::kF32, DType::kBF16, DType::kF8E4M3};
    std::vector<Parameter*> by_format[std::size(kFormats)], experts;
    for (Parameter* p : modules[u]->parameters()) {
      if (p->value.data == nullptr || p->value.dtype != DType::kF32 || !p->value.is_contiguous()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "fsdp: parameter ", p->name, " must be an f32 contiguous tensor with values"));
      }
      const auto* format = std::find(std::begin(kFormats), std::end(kFormats), p->compute_dtype);
      if (format == std::end(kFormats)) {
        return absl::InvalidArgumentError(
            absl::StrCat("fsdp: parameter ", p->name, " asks to be gathered in ",
                         DTypeName(p->compute_dtype), ", not f32, bf16 or e4m3"));
      }
      if (expert_group != nullptr && p->expert) {
        if (p->compute_dtype == DType::kF8E4M3) {
          return absl::InvalidArgumentError(
              absl::StrCat("fsdp: expert parameter ", p->name, " cannot be gathered in float8"));
        }
        experts.push_back(p);
        continue;
      }
      by_format[format - std::begin(kFormats)].push_back(p);
    }
    Unit unit;
    unit.module = modules[u];
    // Each (parameters, format, group) of the unit, in its parts' order: the experts' last.
    struct Layout {
      std::vector<Parameter*> parameters;
      DType format;
      Communicator* group;
      float gradient_scale;
    };
    std::vector<Layout> layouts;
    for (size_t f = 0; f < std::size(kFormats); ++f) {
      layouts.push_back({std::move(by_format[f]), kFormats[f], shard_group_, 1.0f});
    }
    if (!experts.empty()) {
      // Gathered in the format of their first: the mixture of experts computes all alike.
      const DType format = experts.front()->compute_dtype;
      layouts.push_back({std::move(experts), format, expert_group, 1.0f / static_cast<float>(ep)});
    }
    for (Layout& layout : layouts) {
      const DType format = layout.format;
      if (layout.parameters.empty()) continue;
      Part part;
      part.group = layout.group;
      part.gradient_scale = layout.gradient_scale;
      part.flat = std::make_unique<FlatUnit>(std::move(layout.parameters), layout.group->size(),
                                             layout.group->rank(), local_count, device, format);
      // The next run starts 64-byte aligned, so the optimizer's flat buffer of the runs does
      // (TrainStep's requirement); an 8-value parameter (the experts' bias) would break it. The
      // gap stays zero: no parameter's, no update.
      local_count = (local_count + part.flat->shard_count() + 15) / 16 * 16;
      largest = std::max(largest, part.flat->shard_count());
      if (format == DType::kF8E4M3) {
        float8_parameters += static_cast<int64_t>(part.flat->parameter_count());
      }
      unit.parts.push_back(std::move(part));
    }
    // TorchTitan's policies: "default" keeps the last block gathered (backward needs it first)
    // and the root too (FSDP2 never reshards the root after forward).
    const bool is_root = u == 0, is_last_block = u == blocks;
    unit.reshard_after_forward =
        policy_ == "always" || (policy_ == "default" && !is_root && !is_last_block);
    units_.push_back(std::move(unit));
  }
  TITAN_ASSIGN_OR_RETURN(local_, DeviceBuffer::Allocate(device, local_count));
  TITAN_ASSIGN_OR_RETURN(local_grad_, DeviceBuffer::Allocate(device, local_count));
  TITAN_ASSIGN_OR_RETURN(scratch_, DeviceBuffer::Allocate(device, largest));
  TITAN_ASSIGN_OR_RETURN(amax_, DeviceBuffer::Allocate(device, float8_parameters));
  if (float8_parameters > 0 && mesh.shape().degree(MeshDim::kTp) > 1) {
    Communicator& tp = mesh.group(MeshDim::kTp);
    TITAN_ASSIGN_OR_RETURN(tp_amax_group_, tp.Split(0, tp.rank()));
  }
  int64_t amax_offset = 0;
  for (size_t u = 0; u < units_.size(); ++u) {
    for (Part& part : units_[u].parts) {
      if (part.flat->format() == DType::kF8E4M3) {
        const auto count = static_cast<int64_t>(part.flat->parameter_count());
        part.flat->set_amax(amax_.view(amax_offset, count));
        amax_offset += count;
      }
      TITAN_RETURN_IF_ERROR(part.flat->Shard(local_.f32(), local_grad_.f32(), segments_));
    }
    units_[u].module->AddHooks(std::make_unique<UnitHooks>(*this, u));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace titan::fsdp

TITAN_PLUGIN(titan::ParallelPlugin, titan::fsdp::Fsdp, "fsdp", "1.0.0",
             "fully sharded data parallel (dp_shard; HSDP with dp_replicate)")
