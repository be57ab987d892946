#include "plugins/parallel/tp/tp_shards.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace titan::tp {

absl::Status TpShards::CopyBox(float* full, float* box, const std::vector<int64_t>& full_shape,
                               int dim, int rank, int degree, bool to_box) const {
  // The tensor as [outer, extent, inner] around the split dimension: the box is one contiguous
  // run of extent / degree * inner elements in each of the outer blocks.
  int64_t outer = 1, extent = 1, inner = 1;
  for (int d = 0; d < static_cast<int>(full_shape.size()); ++d) {
    (d < dim ? outer : d == dim ? extent : inner) *= full_shape[d];
  }
  if (dim == kReplicated) outer = 1, degree = 1, rank = 0;
  const int64_t run = extent / degree * inner;
  for (int64_t o = 0; o < outer; ++o) {
    const TensorView whole = View(full + (o * extent * inner + rank * run), {run});
    const TensorView part = View(box + o * run, {run});
    TITAN_RETURN_IF_ERROR(to_box ? compute_.Copy(whole, part) : compute_.Copy(part, whole));
  }
  return absl::OkStatus();
}

std::optional<int> SplitDim(TensorParallelStyle style, int rank) {
  switch (style) {
    case TensorParallelStyle::kUndeclared:
      return std::nullopt;
    case TensorParallelStyle::kReplicate:
      return kReplicated;
    case TensorParallelStyle::kColumnwise:
      return std::max(rank - 2, 0);
    case TensorParallelStyle::kVocabParallelEmbedding:
      return 0;
    case TensorParallelStyle::kRowwise:
      return rank - 1;
  }
  return std::nullopt;
}

absl::Status TpShards::Shard(const std::vector<Parameter*>& parameters, int degree, int rank) {
  if (!entries_.empty()) return absl::FailedPreconditionError("tp: parameters sharded twice");
  int64_t count = 0;
  for (Parameter* p : parameters) {
    const std::optional<int> dim = SplitDim(p->tp_style, static_cast<int>(p->full_shape.size()));
    if (!dim) {
      return absl::InvalidArgumentError(
          absl::StrCat("tp: the model declares no tensor-parallel style for parameter ", p->name,
                       " (its module must set Parameter::tp_style: column-wise, row-wise, "
                       "vocabulary-parallel embedding or replicated)"));
    }
    if (p->value.data == nullptr || p->value.dtype != DType::kF32 || !p->value.is_contiguous() ||
        p->value.shape != p->full_shape || p->value.shape.empty() || p->value.shape.size() > 3) {
      return absl::InvalidArgumentError(
          absl::StrCat("tp: parameter ", p->name,
                       " must be a whole f32 contiguous vector, matrix or stack of matrices with "
                       "values"));
    }
    if (*dim != kReplicated && p->full_shape[*dim] % degree != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tp: parameter ", p->name, " has ", p->full_shape[*dim], " along dim ", *dim,
                       ", which ", degree, " tensor-parallel ranks cannot split evenly"));
    }
    entries_.push_back({p, *dim, count});
    // Each box starts on a 64-byte boundary, as in the model's arenas, and the total stays a
    // multiple of 16 floats, as the optimizer's state slots expect.
    count += (p->value.numel() / (*dim == kReplicated ? 1 : degree) + 15) / 16 * 16;
  }
  TITAN_ASSIGN_OR_RETURN(local_, DeviceBuffer::Allocate(device_, count));
  TITAN_ASSIGN_OR_RETURN(local_grad_, DeviceBuffer::Allocate(device_, count));
  for (const Entry& e : entries_) {
    Parameter& p = *e.p;
    std::vector<int64_t> shape = p.full_shape, offset(shape.size(), 0);
    if (e.dim != kReplicated) {
      shape[e.dim] /= degree;
      offset[e.dim] = shape[e.dim] * rank;
    }
    float* value = local_.f32() + e.offset;
    TITAN_RETURN_IF_ERROR(
        CopyBox(p.value.data_as<float>(), value, p.full_shape, e.dim, rank, degree, true));
    p.value = View(value, shape);
    p.grad = View(local_grad_.f32() + e.offset, shape);
    p.local_offset = std::move(offset);
    p.placements[static_cast<int>(MeshDim::kTp)] =
        e.dim == kReplicated ? Placement{} : Placement{Placement::Kind::kShard, e.dim};
    segments_.push_back({e.offset, p.value.numel(), p.weight_decay});
  }
  return absl::OkStatus();
}

absl::Status TpShards::Unshard(Communicator& group) {
  if (!whole_.empty()) return absl::OkStatus();
  const int degree = group.size();
  for (const Entry& e : entries_) {
    Parameter& p = *e.p;
    const int64_t box = p.value.numel(), numel = e.dim == kReplicated ? box : box * degree;
    TITAN_ASSIGN_OR_RETURN(DeviceBuffer whole, DeviceBuffer::Allocate(device_, numel));
    if (e.dim == kReplicated) {
      TITAN_RETURN_IF_ERROR(compute_.Copy(View(p.value.data_as<float>(), {box}), whole.view()));
    } else {
      // Every rank's box, in rank order, then each put in its place.
      TITAN_ASSIGN_OR_RETURN(DeviceBuffer boxes, DeviceBuffer::Allocate(device_, numel));
      TITAN_RETURN_IF_ERROR(group.AllGather(View(p.value.data_as<float>(), {box}), boxes.view()));
      for (int r = 0; r < degree; ++r) {
        TITAN_RETURN_IF_ERROR(CopyBox(whole.f32(), boxes.f32() + r * box, p.full_shape, e.dim, r,
                                      degree, /*to_box=*/false));
      }
    }
    TITAN_ASSIGN_OR_RETURN(DeviceBuffer grad, DeviceBuffer::Allocate(device_, numel));  // zeroed
    p.value = View(whole.f32(), p.full_shape);
    p.grad = View(grad.f32(), p.full_shape);
    p.local_offset.clear();
    p.placements[static_cast<int>(MeshDim::kTp)] = Placement{};
    whole_.push_back(std::move(whole));
    whole_.push_back(std::move(grad));
  }
  return absl::OkStatus();
}

}  // namespace titan::tp
