// The float8 converter (model.converters = ["float8"]): the model's linear layers y = x W^T run
// their three GEMMs (output, grad_input, grad_weight) through the compute's Float8Quantize and
// Float8Gemm as a float8 recipe plugin describes them (titan/float8.h), accumulating in f32
// into f32 outputs; so do a mixture of experts' routed experts (grouped GEMMs) under a recipe
// that scales rowwise, each expert's group of rows and its weight quantized on their own.
// Weights, gradients and checkpoints stay f32: Float8 is a compute format.
#ifndef TITAN_CORE_MODEL_FLOAT8_LINEAR_H_
#define TITAN_CORE_MODEL_FLOAT8_LINEAR_H_

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/tensor/arena.h"
#include "titan/communicator.h"
#include "titan/compute.h"
#include "titan/float8.h"

namespace titan {

// One linear layer the converter looked at: its weight's parameter index, its fully qualified
// name ("layers.0.attention.wq", "output"), its weight's [out_features, in_features] and the
// outcome. A grouped one is a mixture of experts' routed experts' weight [experts, out, in]
// ("layers.0.moe.experts.w1"): one linear layer per expert, on that expert's group of rows.
struct Float8LinearChoice {
  int weight = -1;
  std::string fqn;
  std::vector<int64_t> shape;
  enum Outcome {
    kFloat8,
    kFiltered,
    kShapeNotDivisibleBy16,
    kGroupedNeedsRowwise,  // a grouped weight under a recipe that does not scale rowwise
  } outcome = kFloat8;
  bool grouped = false;
};

// Whether a recipe converts grouped experts: its forward scales both operands rowwise (rowwise,
// rowwise_with_gw_hp). TorchTitan's grouped experts take Float8 only so (torchao's scaled
// grouped GEMM scales per row of each group, and per output feature of each expert's weight);
// one scale over a tensor (tensorwise) has no grouped form there.
bool ConvertsGroupedExperts(const Float8Recipe& recipe);

// Which of `linears` (weight, fqn, shape and grouped set) run in Float8: not those the plugin's
// filter keeps in high precision, nor grouped ones under a recipe that does not convert them,
// nor those with a dimension not divisible by 16 (the FP8 GEMMs' alignment, as TorchTitan's
// filter; a grouped weight's per-expert [out, in]).
std::vector<Float8LinearChoice> ChooseFloat8Linears(std::vector<Float8LinearChoice> linears,
                                                    const Float8Plugin& plugin);
// The log lines: the recipe's casts, the layers in Float8 and those left in high precision
// with why.
std::vector<std::string> DescribeFloat8Linears(const std::vector<Float8LinearChoice>& choices,
                                               absl::string_view recipe_name,
                                               const Float8Recipe& recipe);

// A GEMM operand of a Float8 linear: in high precision (f32, or bf16 under mixed precision), or
// already quantized (e4m3 codes laid out as `high` would be, with one f32 inverse scale: a weight
// fsdp gathered in float8). A pre-quantized operand needs a tensorwise e4m3 cast in the recipe.
struct Float8Operand {
  TensorView high;
  TensorView codes, inverse_scale;  // codes.data null: quantize `high`
};

// How tensor and context parallelism split a linear layer's GEMM operands across ranks: tp the
// weight [out, in] along out (column-parallel: wq, wk, wv, w1, w3, output) or along in
// (row-parallel: wo, w2), cp the tokens. Where one scale covers values that other ranks hold, the
// amaxes are max-reduced over those ranks first (a tensor's over every split of it, a row's over
// a split of the reduced dimension), so that every rank quantizes its piece as one rank holding
// the whole would (as torchao's scaling of DTensors under TorchTitan's tensor parallelism).
struct Float8Split {
  bool row_parallel = false;
  Communicator* tp = nullptr;  // null: the weight is whole
  // The ranks holding the rest of every sequence (context parallelism's); null: whole ones.
  Communicator* sequence = nullptr;
};

class Float8Linears {
 public:
  Float8Linears(const Float8Recipe& recipe, Compute& compute, DevicePlugin* device,
                const std::vector<Float8LinearChoice>& choices);

  // Whether the linear layer of this weight (a parameter index) runs in Float8.
  bool Converts(int weight) const {
    return weight >= 0 && weight < static_cast<int>(converted_.size()) && converted_[weight];
  }
  const Float8Recipe& recipe() const { return recipe_; }

  // out [n, out] = in [n, in] . w [out, in]^T, or += with accumulate. A weight handed over
  // quantized is taken as it is: its scale covers the whole weight already (fsdp's gather).
  absl::Status Forward(const TensorView& in, const Float8Operand& w, TensorView out,
                       bool accumulate, const Float8Split& split = {});
  // dinp [n, in] += dout [n, out] . w [out, in] (= without accumulate).
  absl::Status InputGrad(const TensorView& dout, const Float8Operand& w, TensorView dinp,
                         const Float8Split& split = {}, bool accumulate = true);
  // dw [out, in] += dout [n, out]^T . in [n, in]; in high precision (the operands' dtype) if the
  // recipe says so.
  absl::Status WeightGrad(const TensorView& dout, const TensorView& in, TensorView dw,
                          const Float8Split& split = {});

  // A grouped expert runs Forward and InputGrad on its group of rows [rows, k] with its own
  // weight [out, in], so that every scale covers that group and that expert alone (torchao's
  // scaled grouped GEMM), and here its weight gradient: dw [out, in] += dout^T . in over the
  // group, given in pieces ([rows_i, out] and [rows_i, in]: under expert parallelism one per
  // source rank) that are quantized as one group, joined first when there are several.
  absl::Status GroupedWeightGrad(std::span<const TensorView> dout, std::span<const TensorView> in,
                                 TensorView dw);

  // Async tensor parallelism's rings: a linear layer's output or input-gradient GEMM by chunks
  // of its `a` rows (the input of Forward, the dout of InputGrad), each chunk's rows equal to the
  // whole GEMM's. BeginChunks quantizes w once and takes, before the ring, the amaxes a scale
  // over more than one chunk needs: from the whole `a` (a_gathered false: its k may be split over
  // tp), or from this rank's rows of it while the others' are gathered over split.tp
  // (a_gathered true; the rows' k must be whole then). `rows` is all of a's rows. Then
  // GemmChunk(a_rows, first, c) for each chunk of rows from `first` on, until the next Begin.
  enum class ChunkedGemm { kOutput, kGradInput };
  absl::Status BeginChunks(ChunkedGemm which, const TensorView& a, bool a_gathered, int64_t rows,
                           const Float8Operand& w, const Float8Split& split);
  // c [a_rows' rows, n] (+)= a_rows . b^T as BeginChunks set up.
  absl::Status GemmChunk(const TensorView& a_rows, int64_t first, TensorView c, bool accumulate);

  // The last Float8 GEMM's operands as Float8Gemm took them (a: 0, b: 1): their codes and
  // inverse scales, in the device scratch the next GEMM overwrites. For tests and debugging.
  struct Operand {
    TensorView codes, inverse_scales;
  };
  const Operand& last_operand(int index) const { return last_[index]; }

 private:
  // A GEMM operand as Float8Gemm takes it, [rows, k]: the operand, whether to transpose it
  // there, and the ranks that hold the other pieces of its rows and of its k (null: none).
  struct Input {
    Float8Operand x;
    bool transpose;
    Communicator* rows_split;
    Communicator* k_split;
  };
  // Forward's and InputGrad's operands (x the input or dout).
  Input OperandA(ChunkedGemm which, const TensorView& x, const Float8Split& split) const;
  Input OperandB(ChunkedGemm which, const Float8Operand& w, const Float8Split& split) const;
  const Float8GemmRecipe& RecipeOf(ChunkedGemm which) const {
    return which == ChunkedGemm::kOutput ? recipe_.output : recipe_.grad_input;
  }
  // c [m, n] = a . b^T (+ c with beta 1), each operand cast as `gemm` says.
  absl::Status Gemm(const Float8GemmRecipe& gemm, const Input& a, const Input& b, float beta,
                    TensorView c);
  // Operand `index` (a: 0, b: 1) cast as `cast` says into the scratch's codes and scales (or
  // its pre-quantized codes, transposed there if asked): Float8Gemm's view of it.
  absl::StatusOr<Operand> Quantize(int index, const Float8Cast& cast, const Input& x, int64_t rows,
                                   int64_t k);
  // Device scratch for the two operands' codes and scales (and their amaxes, the same sizes),
  // grown to the largest GEMM seen.
  absl::Status Reserve(int64_t a_codes, int64_t b_codes, int64_t a_scales, int64_t b_scales);
  // The [rows, width] of `pieces` ([rows_i, width], one dtype) one under the other.
  static absl::StatusOr<std::vector<int64_t>> JoinedShape(std::span<const TensorView> pieces);
  // `pieces` one under the other in joined_'s entry `index` (reserved), as `shape`.
  absl::StatusOr<TensorView> Join(int index, std::span<const TensorView> pieces,
                                  const std::vector<int64_t>& shape);

  Float8Recipe recipe_;
  Compute* compute_;
  DevicePlugin* device_;
  std::vector<bool> converted_;  // per parameter index
  Arena scratch_;
  int64_t reserved_[4] = {0, 0, 0, 0};
  // A grouped weight gradient's pieces joined (dout: 0, in: 1), grown to the largest group seen.
  Arena joined_;
  int64_t joined_bytes_[2] = {0, 0};
  Operand last_[2];
  // Set by BeginChunks: the GEMM, its b (quantized in last_[1] unless in high precision) and a's
  // amaxes taken before the ring (data null: each chunk's rows' own).
  struct Chunks {
    const Float8GemmRecipe* gemm = nullptr;
    Input b;
    TensorView a_amax;
  } chunks_;
};

}  // namespace titan

#endif  // TITAN_CORE_MODEL_FLOAT8_LINEAR_H_
