#include "core/model/float8_linear.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace titan {
namespace {

// The FP8 GEMMs (cuBLASLt, torch._scaled_mm) need every dimension of a weight divisible by 16.
constexpr int64_t kFloat8Alignment = 16;

const char* FormatName(DType dtype) { return dtype == DType::kF8E5M2 ? "e5m2" : "e4m3"; }

std::string DescribeGemm(const char* name, const Float8GemmRecipe& gemm) {
  if (gemm.high_precision) return absl::StrCat(name, " high precision");
  auto cast = [](const Float8Cast& c) {
    return absl::StrCat(FormatName(c.dtype),
                        c.granularity == Float8Granularity::kRow ? "/row" : "/tensor");
  };
  return absl::StrCat(name, " ", cast(gemm.a), " x ", cast(gemm.b));
}

// The shape the log shows: a grouped weight's per-expert matrix after its experts.
std::string ShapeText(const Float8LinearChoice& c) {
  if (!c.grouped) return absl::StrCat("[", absl::StrJoin(c.shape, ", "), "]");
  return absl::StrCat("[", absl::StrJoin(c.shape.begin() + 1, c.shape.end(), ", "), "] (of ",
                      c.shape[0], " experts)");
}

}  // namespace

bool ConvertsGroupedExperts(const Float8Recipe& recipe) {
  const Float8GemmRecipe& output = recipe.output;
  return !output.high_precision && output.a.granularity == Float8Granularity::kRow &&
         output.b.granularity == Float8Granularity::kRow;
}

std::vector<Float8LinearChoice> ChooseFloat8Linears(std::vector<Float8LinearChoice> linears,
                                                    const Float8Plugin& plugin) {
  const bool grouped_ok = ConvertsGroupedExperts(plugin.Recipe());
  for (Float8LinearChoice& linear : linears) {
    // A grouped weight's GEMMs see one expert's [out, in] at a time.
    const auto first = linear.shape.begin() + (linear.grouped ? 1 : 0);
    const bool aligned =
        std::all_of(first, linear.shape.end(), [](int64_t d) { return d % kFloat8Alignment == 0; });
    linear.outcome = !plugin.Converts(linear.fqn)    ? Float8LinearChoice::kFiltered
                     : linear.grouped && !grouped_ok ? Float8LinearChoice::kGroupedNeedsRowwise
                     : !aligned                      ? Float8LinearChoice::kShapeNotDivisibleBy16
                                                     : Float8LinearChoice::kFloat8;
  }
  return linears;
}

std::vector<std::string> DescribeFloat8Linears(const std::vector<Float8LinearChoice>& choices,
                                               absl::string_view recipe_name,
                                               const Float8Recipe& recipe) {
  std::vector<std::string> converted, lines, grouped_converted;
  int64_t linears = 0, grouped = 0, grouped_refused = 0;
  for (const Float8LinearChoice& c : choices) {
    (c.grouped ? grouped : linears) += 1;
    grouped_refused += c.outcome == Float8LinearChoice::kGroupedNeedsRowwise;
    if (c.outcome != Float8LinearChoice::kFloat8) continue;
    (c.grouped ? grouped_converted : converted).push_back(c.fqn);
  }
  lines.push_back(absl::StrCat("[float8] recipe ", recipe_name, ": ",
                               DescribeGemm("output", recipe.output), ", ",
                               DescribeGemm("grad_input", recipe.grad_input), ", ",
                               DescribeGemm("grad_weight", recipe.grad_weight),
                               recipe.power_of_two_scales ? "; power-of-two scales" : ""));
  lines.push_back(absl::StrCat(
      "[float8] ", converted.size(), " of ", linears,
      " linear layers in Float8: ", converted.empty() ? "none" : absl::StrJoin(converted, ", ")));
  if (grouped > 0 && grouped_refused == 0) {
    lines.push_back(absl::StrCat(
        "[float8] ", grouped_converted.size(), " of ", grouped,
        " routed expert weights in Float8 (grouped GEMMs, each expert's rows and weight scaled "
        "on their own): ",
        grouped_converted.empty() ? "none" : absl::StrJoin(grouped_converted, ", ")));
  } else if (grouped_refused > 0) {
    lines.push_back(
        absl::StrCat("[float8] the routed experts stay in high precision (", grouped_refused,
                     " expert weights): grouped experts run in Float8 only with rowwise scales, as "
                     "TorchTitan's, and recipe ",
                     recipe_name,
                     " scales the forward's operands per tensor; float8.recipe_name = "
                     "\"rowwise\" converts them"));
  }
  for (const Float8LinearChoice& c : choices) {
    if (c.outcome == Float8LinearChoice::kFiltered) {
      lines.push_back(absl::StrCat("[float8] ", c.fqn,
                                   " stays in high precision: matched by float8.filter_fqns"));
    } else if (c.outcome == Float8LinearChoice::kShapeNotDivisibleBy16) {
      lines.push_back(absl::StrCat("[float8] ", c.fqn, " stays in high precision: its weight ",
                                   ShapeText(c), " is not divisible by ", kFloat8Alignment));
    }
  }
  return lines;
}

Float8Linears::Float8Linears(const Float8Recipe& recipe, Compute& compute, DevicePlugin* device,
                             const std::vector<Float8LinearChoice>& choices)
    : recipe_(recipe), compute_(&compute), device_(device) {
  for (const Float8LinearChoice& c : choices) {
    if (c.outcome != Float8LinearChoice::kFloat8) continue;
    if (c.weight >= static_cast<int>(converted_.size())) converted_.resize(c.weight + 1, false);
    converted_[c.weight] = true;
  }
}

// The operands' dimensions, as Float8Gemm takes them ([rows, k]), and who splits each:
//   output:      a = x [tokens, in],      b = W [out, in]
//   grad_input:  a = dy [tokens, out],    b = W^T [in, out]
//   grad_weight: a = dy^T [out, tokens],  b = x^T [in, tokens]
Float8Linears::Input Float8Linears::OperandA(ChunkedGemm which, const TensorView& x,
                                             const Float8Split& split) const {
  Communicator* in_split = split.row_parallel ? split.tp : nullptr;
  Communicator* out_split = split.row_parallel ? nullptr : split.tp;
  return {{x, {}, {}}, false, split.sequence, which == ChunkedGemm::kOutput ? in_split : out_split};
}

Float8Linears::Input Float8Linears::OperandB(ChunkedGemm which, const Float8Operand& w,
                                             const Float8Split& split) const {
  Communicator* in_split = split.row_parallel ? split.tp : nullptr;
  Communicator* out_split = split.row_parallel ? nullptr : split.tp;
  if (which == ChunkedGemm::kOutput) return {w, false, out_split, in_split};
  return {w, true, in_split, out_split};
}

absl::Status Float8Linears::Forward(const TensorView& in, const Float8Operand& w, TensorView out,
                                    bool accumulate, const Float8Split& split) {
  return Gemm(recipe_.output, OperandA(ChunkedGemm::kOutput, in, split),
              OperandB(ChunkedGemm::kOutput, w, split), accumulate ? 1.0f : 0.0f, out);
}

absl::Status Float8Linears::InputGrad(const TensorView& dout, const Float8Operand& w,
                                      TensorView dinp, const Float8Split& split, bool accumulate) {
  return Gemm(recipe_.grad_input, OperandA(ChunkedGemm::kGradInput, dout, split),
              OperandB(ChunkedGemm::kGradInput, w, split), accumulate ? 1.0f : 0.0f, dinp);
}

absl::Status Float8Linears::BeginChunks(ChunkedGemm which, const TensorView& a, bool a_gathered,
                                        int64_t rows, const Float8Operand& w,
                                        const Float8Split& split) {
  const Float8GemmRecipe& gemm = RecipeOf(which);
  const Input in = OperandA(which, a, split);
  chunks_ = Chunks{&gemm, OperandB(which, w, split), {}};
  if (gemm.high_precision) return absl::OkStatus();
  const Float8Operand& b = chunks_.b.x;
  const std::vector<int64_t>& shape_b = b.codes.data != nullptr ? b.codes.shape : b.high.shape;
  const int64_t k = a.shape[1], n = shape_b[chunks_.b.transpose ? 1 : 0];
  const bool row_a = gemm.a.granularity == Float8Granularity::kRow;
  const bool row_b = gemm.b.granularity == Float8Granularity::kRow;
  TITAN_RETURN_IF_ERROR(Reserve(rows * k, n * k, row_a ? rows : 1, row_b ? n : 1));
  TITAN_ASSIGN_OR_RETURN(last_[1], Quantize(1, gemm.b, chunks_.b, n, k));
  // The ranks whose pieces share a's scales: as Quantize's, and under a gather the other rows'.
  std::vector<Communicator*> sharing = {in.k_split};
  if (!row_a) sharing.push_back(in.rows_split);
  if (!row_a && a_gathered) sharing.push_back(split.tp);
  std::erase_if(sharing,
                [](Communicator* group) { return group == nullptr || group->size() == 1; });
  if (sharing.empty()) return absl::OkStatus();  // each chunk's rows scale alone
  if (row_a && a_gathered) {
    return absl::InternalError(
        "float8: rows scaled over a split k cannot be gathered by chunks (async tensor "
        "parallelism)");
  }
  TensorView amax = scratch_.at(4).view();
  amax.dtype = DType::kF32;
  amax.shape = {row_a ? rows : 1};
  amax.strides.clear();
  const Float8Scaling scaling{gemm.a.granularity, recipe_.power_of_two_scales, false, {}};
  TITAN_RETURN_IF_ERROR(compute_->Float8Amax(a, scaling, amax));
  for (Communicator* group : sharing) TITAN_RETURN_IF_ERROR(group->AllReduce(amax, ReduceOp::kMax));
  chunks_.a_amax = amax;
  return absl::OkStatus();
}

absl::Status Float8Linears::GemmChunk(const TensorView& a_rows, int64_t first, TensorView c,
                                      bool accumulate) {
  if (chunks_.gemm == nullptr) {
    return absl::InternalError("float8: GemmChunk without BeginChunks");
  }
  const Float8GemmRecipe& gemm = *chunks_.gemm;
  const float beta = accumulate ? 1.0f : 0.0f;
  if (gemm.high_precision)
    return Gemm(gemm, {{a_rows, {}, {}}, false, nullptr, nullptr}, chunks_.b, beta, c);
  const bool row_a = gemm.a.granularity == Float8Granularity::kRow;
  const int64_t m = a_rows.shape[0], k = a_rows.shape[1];
  Float8Scaling scaling{gemm.a.granularity, recipe_.power_of_two_scales, false, chunks_.a_amax};
  if (row_a && scaling.amax.data != nullptr) {
    scaling.amax.data = static_cast<float*>(scaling.amax.data) + first;
    scaling.amax.shape = {m};
  }
  TensorView codes = scratch_.at(0).view(), scales = scratch_.at(2).view();
  codes.dtype = gemm.a.dtype;
  codes.shape = {m, k};
  codes.strides.clear();
  scales.dtype = DType::kF32;
  scales.shape = {row_a ? m : 1};
  scales.strides.clear();
  TITAN_RETURN_IF_ERROR(compute_->Float8Quantize(a_rows, scaling, codes, scales));
  last_[0] = {codes, scales};
  return compute_->Float8Gemm(codes, scales, last_[1].codes, last_[1].inverse_scales, 1.0f, beta,
                              c);
}

absl::Status Float8Linears::WeightGrad(const TensorView& dout, const TensorView& in, TensorView dw,
                                       const Float8Split& split) {
  Communicator* in_split = split.row_parallel ? split.tp : nullptr;
  Communicator* out_split = split.row_parallel ? nullptr : split.tp;
  return Gemm(recipe_.grad_weight, {{dout, {}, {}}, true, out_split, split.sequence},
              {{in, {}, {}}, true, in_split, split.sequence}, 1.0f, dw);
}

absl::Status Float8Linears::GroupedWeightGrad(std::span<const TensorView> dout,
                                              std::span<const TensorView> in, TensorView dw) {
  if (dout.size() != in.size() || dout.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "float8: a grouped weight gradient expected ", "as many pieces of dout as of in (at least ",
        "one), found ", dout.size(), " and ", in.size()));
  }
  // In high precision a sum of the pieces' products is the group's.
  if (dout.size() == 1 || recipe_.grad_weight.high_precision) {
    for (size_t i = 0; i < dout.size(); ++i) TITAN_RETURN_IF_ERROR(WeightGrad(dout[i], in[i], dw));
    return absl::OkStatus();
  }
  TITAN_ASSIGN_OR_RETURN(const std::vector<int64_t> dout_shape, JoinedShape(dout));
  TITAN_ASSIGN_OR_RETURN(const std::vector<int64_t> in_shape, JoinedShape(in));
  const int64_t want[2] = {
      dout_shape[0] * dout_shape[1] * static_cast<int64_t>(DTypeSize(dout[0].dtype)),
      in_shape[0] * in_shape[1] * static_cast<int64_t>(DTypeSize(in[0].dtype))};
  if (want[0] > joined_bytes_[0] || want[1] > joined_bytes_[1]) {
    for (int i = 0; i < 2; ++i) joined_bytes_[i] = std::max(joined_bytes_[i], want[i]);
    // The entries hold bytes; each join views its entry in its pieces' dtype.
    ArenaPlan plan;
    TITAN_RETURN_IF_ERROR(plan.Add("dout", {joined_bytes_[0]}, DType::kF8E4M3).status());
    TITAN_RETURN_IF_ERROR(plan.Add("in", {joined_bytes_[1]}, DType::kF8E4M3).status());
    TITAN_ASSIGN_OR_RETURN(joined_, Arena::Allocate(plan, device_, "float8 grouped join"));
  }
  TITAN_ASSIGN_OR_RETURN(const TensorView joined_dout, Join(0, dout, dout_shape));
  TITAN_ASSIGN_OR_RETURN(const TensorView joined_in, Join(1, in, in_shape));
  return WeightGrad(joined_dout, joined_in, dw);
}

absl::StatusOr<std::vector<int64_t>> Float8Linears::JoinedShape(
    std::span<const TensorView> pieces) {
  const int64_t width = pieces[0].shape.size() == 2 ? pieces[0].shape[1] : -1;
  int64_t rows = 0;
  for (const TensorView& piece : pieces) {
    if (piece.shape.size() != 2 || piece.shape[1] != width || piece.dtype != pieces[0].dtype) {
      return absl::InvalidArgumentError(
          absl::StrCat("float8: a grouped weight gradient's pieces expected [rows, ", width,
                       "] in ", DTypeName(pieces[0].dtype), ", found one of ", piece.shape.size(),
                       " dimensions in ", DTypeName(piece.dtype)));
    }
    rows += piece.shape[0];
  }
  return std::vector<int64_t>{rows, width};
}

absl::StatusOr<TensorView> Float8Linears::Join(int index, std::span<const TensorView> pieces,
                                               const std::vector<int64_t>& shape) {
  TensorView joined = joined_.at(index).view();
  joined.dtype = pieces[0].dtype;
  joined.shape = shape;
  joined.strides.clear();
  char* next = static_cast<char*>(joined.data);
  for (const TensorView& piece : pieces) {
    TensorView to = joined;
    to.data = next;
    to.shape = piece.shape;
    TITAN_RETURN_IF_ERROR(compute_->Copy(piece, to));
    next += static_cast<size_t>(piece.numel()) * DTypeSize(piece.dtype);
  }
  return joined;
}

absl::Status Float8Linears::Reserve(int64_t a_codes, int64_t b_codes, int64_t a_scales,
                                    int64_t b_scales) {
  const int64_t want[4] = {a_codes, b_codes, a_scales, b_scales};
  if (std::equal(want, want + 4, reserved_, [](int64_t w, int64_t r) { return w <= r; })) {
    return absl::OkStatus();
  }
  for (int i = 0; i < 4; ++i) reserved_[i] = std::max(reserved_[i], want[i]);
  ArenaPlan plan;
  TITAN_RETURN_IF_ERROR(plan.Add("a", {reserved_[0]}, DType::kF8E4M3).status());
  TITAN_RETURN_IF_ERROR(plan.Add("b", {reserved_[1]}, DType::kF8E4M3).status());
  TITAN_RETURN_IF_ERROR(plan.Add("a_scales", {reserved_[2]}).status());
  TITAN_RETURN_IF_ERROR(plan.Add("b_scales", {reserved_[3]}).status());
  TITAN_RETURN_IF_ERROR(plan.Add("a_amax", {reserved_[2]}).status());
  TITAN_RETURN_IF_ERROR(plan.Add("b_amax", {reserved_[3]}).status());
  TITAN_ASSIGN_OR_RETURN(scratch_, Arena::Allocate(plan, device_, "float8 scratch"));
  return absl::OkStatus();
}

absl::StatusOr<Float8Linears::Operand> Float8Linears::Quantize(int index, const Float8Cast& cast,
                                                               const Input& input, int64_t rows,
                                                               int64_t k) {
  const Float8Operand& x = input.x;
  const bool per_row = cast.granularity == Float8Granularity::kRow;
  auto view = [&](int entry, DType dtype, std::vector<int64_t> shape) {
    TensorView v = scratch_.at(entry).view();
    v.dtype = dtype;
    v.shape = std::move(shape);
    v.strides.clear();
    return v;
  };
  const std::vector<int64_t> scales = {per_row ? rows : 1};
  Operand q{view(index, cast.dtype, {rows, k}), view(2 + index, DType::kF32, scales)};
  if (x.codes.data == nullptr) {
    Float8Scaling scaling{cast.granularity, recipe_.power_of_two_scales, input.transpose, {}};
    // The ranks whose pieces share this operand's scales: a tensor's, every split of it; a
    // row's, those of its k.
    std::vector<Communicator*> sharing = {input.k_split};
    if (!per_row) sharing.push_back(input.rows_split);
    std::erase_if(sharing,
                  [](Communicator* group) { return group == nullptr || group->size() == 1; });
    if (!sharing.empty()) {
      scaling.amax = view(4 + index, DType::kF32, scales);
      TITAN_RETURN_IF_ERROR(compute_->Float8Amax(x.high, scaling, scaling.amax));
      for (Communicator* group : sharing) {
        TITAN_RETURN_IF_ERROR(group->AllReduce(scaling.amax, ReduceOp::kMax));
      }
    }
    TITAN_RETURN_IF_ERROR(compute_->Float8Quantize(x.high, scaling, q.codes, q.inverse_scales));
    return q;
  }
  if (per_row || cast.dtype != x.codes.dtype || recipe_.power_of_two_scales) {
    return absl::InvalidArgumentError(absl::StrCat(
        "float8: a weight gathered in ", DTypeName(x.codes.dtype),
        " with one scale needs the recipe to cast it so (tensorwise e4m3, no power-of-two "
        "scales), found ",
        FormatName(cast.dtype), per_row ? " rowwise" : " tensorwise"));
  }
  q.inverse_scales = x.inverse_scale;
  if (!input.transpose) {
    q.codes = x.codes;
    return q;
  }
  TITAN_RETURN_IF_ERROR(compute_->Transpose(x.codes, q.codes));
  return q;
}

absl::Status Float8Linears::Gemm(const Float8GemmRecipe& gemm, const Input& a, const Input& b,
                                 float beta, TensorView c) {
  if (gemm.high_precision) {
    if (a.x.high.data == nullptr || b.x.high.data == nullptr) {
      return absl::InvalidArgumentError(
          "float8: a high-precision GEMM cannot take a weight gathered in float8");
    }
    // Gemm's c = op(a) . op(b) with op(b) [k, n]: Float8Gemm's b^T.
    return compute_->Gemm(a.x.high, a.transpose, b.x.high, !b.transpose, 1.0f, beta, c);
  }
  auto shape_of = [](const Float8Operand& x) {
    return x.codes.data != nullptr ? x.codes.shape : x.high.shape;
  };
  const std::vector<int64_t> shape_a = shape_of(a.x), shape_b = shape_of(b.x);
  const int64_t m = shape_a[a.transpose ? 1 : 0], k = shape_a[a.transpose ? 0 : 1];
  const int64_t n = shape_b[b.transpose ? 1 : 0];
  const bool row_a = gemm.a.granularity == Float8Granularity::kRow;
  const bool row_b = gemm.b.granularity == Float8Granularity::kRow;
  TITAN_RETURN_IF_ERROR(Reserve(m * k, n * k, row_a ? m : 1, row_b ? n : 1));
  TITAN_ASSIGN_OR_RETURN(last_[0], Quantize(0, gemm.a, a, m, k));
  TITAN_ASSIGN_OR_RETURN(last_[1], Quantize(1, gemm.b, b, n, k));
  return compute_->Float8Gemm(last_[0].codes, last_[0].inverse_scales, last_[1].codes,
                              last_[1].inverse_scales, 1.0f, beta, c);
}

}  // namespace titan
