#include "core/train/pipeline_gather.h"

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace titan {

absl::StatusOr<std::unique_ptr<DecoderModel>> GatherPipelineModel(const DecoderModel& stage_model,
                                                                  Communicator& pp_group,
                                                                  const ActivationCheckpoint& ac,
                                                                  const ModelCompute& where) {
  std::unique_ptr<DecoderModel> whole;
  const bool lead = pp_group.rank() == 0;
  if (lead) {
    TITAN_ASSIGN_OR_RETURN(whole, DecoderModel::Create(stage_model.config(), ac, where));
  }
  absl::flat_hash_map<std::string, const Parameter*> held;
  for (const Parameter& p : stage_model.Parameters()) held[p.name] = &p;
  Compute& compute = stage_model.compute();
  for (const auto& [name, shape] : stage_model.WholeParameterShapes()) {
    int64_t count = 1;
    for (int64_t extent : shape) count *= extent;
    std::vector<float> values(static_cast<size_t>(count), 0.0f);
    auto it = held.find(name);
    if (it != held.end()) {
      const Parameter& p = *it->second;
      if (p.value.data == nullptr || p.value.numel() != count) {
        return absl::FailedPreconditionError(
            absl::StrCat("gathering the pipeline's model: parameter ", name, " is not whole here"));
      }
      TITAN_RETURN_IF_ERROR(compute.CopyToHost(p.value, values.data()));
    }
    TITAN_RETURN_IF_ERROR(pp_group.AllReduce(FlatF32(values.data(), count), ReduceOp::kSum));
    if (!lead) continue;
    for (const Parameter& p : whole->Parameters()) {
      if (p.name == name)
        TITAN_RETURN_IF_ERROR(whole->compute().CopyFromHost(values.data(), p.value));
    }
  }
  return whole;
}

}  // namespace titan
