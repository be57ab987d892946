#include "core/model/modules/module_context.h"

#include <algorithm>
#include <cassert>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/runtime/profiler.h"

namespace titan {

LocalSizes ModuleContext::local() const {
  const int64_t t = tp.size(), vocab = config.vocab_size / t;
  const MoeConfig& moe = config.moe;
  return {config.n_heads / t,
          config.n_kv_heads / t,
          config.hidden_dim() / t,
          vocab,
          vocab * tp.rank(),
          moe.hidden_dim / t,
          moe.shared_experts * moe.hidden_dim / t};
}

TensorView ModuleContext::Rows(const TensorView& matrix, int64_t first, int64_t count) {
  TensorView rows = matrix;
  const int64_t width = matrix.numel() / matrix.shape[0];
  rows.data = static_cast<char*>(matrix.data) + first * width * DTypeSize(matrix.dtype);
  rows.shape[0] = count;
  rows.strides.clear();
  return rows;
}

absl::Status ModuleContext::GatherTokens(const TensorView& local, const TensorView& full,
                                         const TensorView& out) {
  TITAN_RETURN_IF_ERROR(FinishGather());
  pending_gather = PendingGather{local, full, out};
  if (tp.overlap() != nullptr) return absl::OkStatus();
  return FinishGather();
}

absl::Status ModuleContext::FinishGather() {
  if (!pending_gather) return absl::OkStatus();
  const PendingGather g = *pending_gather;
  pending_gather.reset();
  TITAN_ASSIGN_OR_RETURN(const TensorView gathered, tp.GatherTokens(g.local, g.full));
  if (g.out.data == gathered.data) return absl::OkStatus();  // f32, or one rank's own memory
  return compute.Cast(Reshaped(gathered, g.out.shape), g.out);
}

void ModuleContext::RecordOverlap(int64_t start_us) {
  Profiler* profiler = Profiler::Recording();
  for (const OverlapTime& t : tp.overlap()->TakeTimes()) {
    auto it = std::find_if(overlap_times.begin(), overlap_times.end(),
                           [&](const OverlapTime& o) { return o.layer == t.layer; });
    if (it == overlap_times.end()) it = overlap_times.insert(overlap_times.end(), {t.layer, 0, 0});
    it->hidden += t.hidden;
    it->exposed += t.exposed;
    if (profiler != nullptr) {
      profiler->Span(absl::StrCat("async_tp ", t.layer), "tp_overlap", start_us, NowMicros(),
                     absl::StrFormat(R"({"layer": "%s", "hidden_us": %.1f, "exposed_us": %.1f})",
                                     t.layer, 1e6 * t.hidden, 1e6 * t.exposed));
    }
  }
}

TensorView ModuleContext::Reshaped(const TensorView& view, std::vector<int64_t> shape) {
  TensorView reshaped = view;
  reshaped.shape = std::move(shape);
  reshaped.strides.clear();
  assert(view.data == nullptr || reshaped.numel() <= view.numel());
  return reshaped;
}

absl::StatusOr<TensorView> ModuleContext::Operand(const TensorView& x,
                                                  OperandScratch scratch) const {
  if (x.dtype == matmul_dtype) return x;
  TensorView rounded = x;
  rounded.dtype = matmul_dtype;
  rounded.data = this->scratch.bf16[static_cast<int>(scratch)].data;
  TITAN_RETURN_IF_ERROR(compute.Cast(x, rounded));
  return rounded;
}

TensorView ModuleContext::Value(int weight) const {
  const Parameter& p = parameters[weight];
  return F32(p.value.data, p.value.shape);
}

absl::StatusOr<TensorView> ModuleContext::WeightOperand(int weight) const {
  const Parameter& p = parameters[weight];
  if (p.compute.data != nullptr && p.compute.dtype == matmul_dtype) return p.compute;
  if (p.value.data == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("model: parameter ", p.name, " has no values in ", DTypeName(matmul_dtype),
                     " (a plugin gathered it as ", DTypeName(p.compute.dtype), ")"));
  }
  return Operand(p.value, OperandScratch::kWeight);
}

TensorView ModuleContext::Grad(int weight) const {
  const Parameter& p = parameters[weight];
  return F32(p.grad.data, p.grad.shape);
}

}  // namespace titan
