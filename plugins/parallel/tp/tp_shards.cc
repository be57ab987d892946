#include "plugins/parallel/tp/tp_shards.h"

#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace titan::tp {
namespace {

// Copies the box of `full` (row-major [rows, columns], or a vector) that rank `rank` of `degree`
// holds along `dim` into `box`, or back (to_box false) into `full`.
void CopyBox(float* full, float* box, const std::vector<int64_t>& full_shape, int dim, int rank,
             int degree, bool to_box) {
  const int64_t rows = full_shape[0], columns = full_shape.size() > 1 ? full_shape[1] : 1;
  int64_t first_row = 0, box_rows = rows, first_column = 0, box_columns = columns;
  if (dim == 0) box_rows = rows / degree, first_row = box_rows * rank;
  if (dim == 1) box_columns = columns / degree, first_column = box_columns * rank;
  const size_t bytes = static_cast<size_t>(box_columns) * sizeof(float);
  for (int64_t r = 0; r < box_rows; ++r) {
    float* whole = full + (first_row + r) * columns + first_column;
    float* part = box + r * box_columns;
    if (to_box) {
      std::memcpy(part, whole, bytes);
    } else {
      std::memcpy(whole, part, bytes);
    }
  }
}

TensorView F32View(float* data, std::vector<int64_t> shape) {
  return TensorView{data, DType::kF32, Device{}, std::move(shape), {}};
}

}  // namespace

std::optional<int> PlannedDim(const std::string& name) {
  static const struct {
    const char* suffix;
    int dim;
  } kPlan[] = {
      {"tok_embeddings.weight", 0},
      {"attention.wq.weight", 0},
      {"attention.wk.weight", 0},
      {"attention.wv.weight", 0},
      {"attention.wo.weight", 1},
      {"feed_forward.w1.weight", 0},
      {"feed_forward.w3.weight", 0},
      {"feed_forward.w2.weight", 1},
      {"output.weight", 0},
      {"attention_norm.weight", kReplicated},
      {"ffn_norm.weight", kReplicated},
      {"norm.weight", kReplicated},
  };
  for (const auto& entry : kPlan) {
    // Whole dotted components only: "norm.weight" must not match "ffn_norm.weight".
    if (name == entry.suffix || absl::EndsWith(name, absl::StrCat(".", entry.suffix))) {
      return entry.dim;
    }
  }
  return std::nullopt;
}

absl::Status TpShards::Shard(const std::vector<Parameter*>& parameters, int degree, int rank) {
  if (!entries_.empty()) return absl::FailedPreconditionError("tp: parameters sharded twice");
  int64_t count = 0;
  for (Parameter* p : parameters) {
    const std::optional<int> dim = PlannedDim(p->name);
    if (!dim) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tp: the tensor-parallel plan has no entry for parameter ", p->name,
          " (expected a Llama weight: tok_embeddings, wq, wk, wv, wo, w1, w2, w3, the norms or "
          "output)"));
    }
    if (p->value.data == nullptr || p->value.dtype != DType::kF32 || !p->value.is_contiguous() ||
        p->value.shape != p->full_shape || p->value.shape.empty() || p->value.shape.size() > 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("tp: parameter ", p->name,
                       " must be a whole f32 contiguous vector or matrix with values"));
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
  local_.assign(static_cast<size_t>(count), 0.0f);
  local_grad_.assign(static_cast<size_t>(count), 0.0f);
  for (const Entry& e : entries_) {
    Parameter& p = *e.p;
    std::vector<int64_t> shape = p.full_shape, offset(shape.size(), 0);
    if (e.dim != kReplicated) {
      shape[e.dim] /= degree;
      offset[e.dim] = shape[e.dim] * rank;
    }
    float* value = local_.data() + e.offset;
    CopyBox(p.value.data_as<float>(), value, p.full_shape, e.dim, rank, degree, /*to_box=*/true);
    p.value = F32View(value, shape);
    p.grad = F32View(local_grad_.data() + e.offset, shape);
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
    auto whole = std::make_unique<float[]>(static_cast<size_t>(numel));
    if (e.dim == kReplicated) {
      std::memcpy(whole.get(), p.value.data, p.value.nbytes());
    } else {
      // Every rank's box, in rank order, then each put in its place.
      auto boxes = std::make_unique<float[]>(static_cast<size_t>(numel));
      TITAN_RETURN_IF_ERROR(
          group.AllGather(FlatF32(p.value.data_as<float>(), box), FlatF32(boxes.get(), numel)));
      for (int r = 0; r < degree; ++r) {
        CopyBox(whole.get(), boxes.get() + r * box, p.full_shape, e.dim, r, degree,
                /*to_box=*/false);
      }
    }
    auto grad = std::make_unique<float[]>(static_cast<size_t>(numel));  // zeroed
    p.value = F32View(whole.get(), p.full_shape);
    p.grad = F32View(grad.get(), p.full_shape);
    p.local_offset.clear();
    p.placements[static_cast<int>(MeshDim::kTp)] = Placement{};
    whole_.push_back(std::move(whole));
    whole_.push_back(std::move(grad));
  }
  return absl::OkStatus();
}

}  // namespace titan::tp
