// Float8 linears split over tensor and context parallelism quantize each rank's piece of every
// GEMM operand as one rank quantizes the whole: the same codes and the same scales.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/cpu/cpu_compute.h"
#include "core/model/float8_linear.h"
#include "core/model/float8_test_matrix.h"
#include "core/model/float8_test_plugin.h"

namespace titan {
namespace {

// Passes stand in for the ranks running at once. Each pass records every rank's max-reductions
// (what it hands in), and answers the i-th reduction of a rank with the largest of all ranks'
// i-th of the pass before (its own values in the first pass). The GEMM operands are fixed inputs,
// so the second pass reduces as the ranks would over one group; with a reduction over tp
// followed by one over cp, the third does.
struct MaxReductions {
  std::vector<std::vector<std::vector<float>>> before, now;  // [rank][call]
  void NextPass() {
    before = std::move(now);
    now.assign(before.size(), {});
  }
};

class ReplayedMaxGroup : public Communicator {
 public:
  ReplayedMaxGroup(MaxReductions& log, int rank, int size) : log_(log), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  absl::Status AllReduce(TensorView buffer, ReduceOp op) override {
    if (op != ReduceOp::kMax) return absl::InternalError("only max reductions expected");
    float* values = buffer.data_as<float>();
    const size_t count = static_cast<size_t>(buffer.numel()), call = calls_++;
    log_.now[rank_].emplace_back(values, values + count);
    for (int r = 0; r < size_ && !log_.before[r].empty(); ++r) {
      const std::vector<float>& theirs = log_.before[r].at(call);
      if (theirs.size() != count) return absl::InternalError("the ranks' reductions differ");
      for (size_t i = 0; i < count; ++i) values[i] = std::max(values[i], theirs[i]);
    }
    return absl::OkStatus();
  }
  absl::Status ReduceScatter(const TensorView&, TensorView, ReduceOp) override { return No(); }
  absl::Status AllGather(const TensorView&, TensorView) override { return No(); }
  absl::Status Broadcast(TensorView, int) override { return No(); }
  absl::Status Send(const TensorView&, int, int) override { return No(); }
  absl::Status Recv(TensorView, int, int) override { return No(); }
  absl::Status Barrier() override { return No(); }
  absl::StatusOr<std::unique_ptr<Communicator>> Split(int, int) override { return No(); }

 private:
  static absl::Status No() { return absl::InternalError("only all-reduces expected"); }
  MaxReductions& log_;
  int rank_, size_;
  size_t calls_ = 0;
};

// An operand of one GEMM as Float8Gemm took it: codes [rows, k] and scales, copied out.
struct Quantized {
  int64_t rows, k;
  std::vector<uint8_t> codes;
  std::vector<float> scales;
};

Quantized Copy(const Float8Linears::Operand& q) {
  const uint8_t* codes = q.codes.data_as<const uint8_t>();
  const float* scales = q.inverse_scales.data_as<const float>();
  return {q.codes.shape[0], q.codes.shape[1], std::vector<uint8_t>(codes, codes + q.codes.numel()),
          std::vector<float>(scales, scales + q.inverse_scales.numel())};
}

enum class Gemm { kOutput, kGradInput, kGradWeight };
const char* Name(Gemm gemm) {
  return gemm == Gemm::kOutput ? "output" : gemm == Gemm::kGradInput ? "grad_input" : "grad_weight";
}

// Runs one GEMM of the linear y = x W^T (x [n, in], W [out, in], dy [n, out]) and returns both
// operands as quantized.
std::array<Quantized, 2> RunGemm(Float8Linears& linears, Gemm gemm, Matrix x, Matrix w, Matrix dy,
                                 const Float8Split& split) {
  Matrix result{0, 0, {}};
  absl::Status status;
  if (gemm == Gemm::kOutput) {
    result = {x.rows, w.rows, std::vector<float>(x.rows * w.rows)};
    status = linears.Forward(x.view(), {w.view(), {}, {}}, result.view(), false, split);
  } else if (gemm == Gemm::kGradInput) {
    result = {dy.rows, w.columns, std::vector<float>(dy.rows * w.columns)};
    status = linears.InputGrad(dy.view(), {w.view(), {}, {}}, result.view(), split);
  } else {
    result = {w.rows, w.columns, std::vector<float>(w.rows * w.columns)};
    status = linears.WeightGrad(dy.view(), x.view(), result.view(), split);
  }
  EXPECT_TRUE(status.ok()) << status;
  return {Copy(linears.last_operand(0)), Copy(linears.last_operand(1))};
}

// Whether `piece` is rank r's block of `whole`: its rows split over `row_ranks`, its k over
// `k_ranks`; per-row scales follow the rows, a tensor's scale is the same.
void ExpectPieceOfWhole(const Quantized& whole, const Quantized& piece, int row_ranks, int k_ranks,
                        int row_rank, int k_rank, const std::string& what) {
  ASSERT_EQ(piece.rows * row_ranks, whole.rows) << what;
  ASSERT_EQ(piece.k * k_ranks, whole.k) << what;
  int64_t differing = 0;
  for (int64_t r = 0; r < piece.rows; ++r) {
    for (int64_t c = 0; c < piece.k; ++c) {
      const int64_t wr = row_rank * piece.rows + r, wc = k_rank * piece.k + c;
      differing += piece.codes[r * piece.k + c] != whole.codes[wr * whole.k + wc];
    }
  }
  EXPECT_EQ(differing, 0) << what << ": codes differing from the whole operand's";
  if (whole.scales.size() == 1) {
    EXPECT_EQ(piece.scales, whole.scales) << what;
    return;
  }
  const auto first = whole.scales.begin() + row_rank * piece.rows;
  EXPECT_EQ(piece.scales, std::vector<float>(first, first + piece.rows)) << what;
}

Float8Recipe Rowwise() { return RowwiseTestPlugin().Recipe(); }

// tp 2 splits W [out, in] by out (column-parallel) or by in (row-parallel), and with it x's
// columns (row-parallel) or dy's (column-parallel); cp 2 splits the tokens. Each rank's operands
// of each GEMM are its blocks of the single rank's.
void CheckSplit(const Float8Recipe& recipe, bool row_parallel, bool tp, bool cp) {
  const int64_t n = 32, in = 64, out = 48;
  const Matrix x = Random(n, in, 1), w = Random(out, in, 2), dy = Random(n, out, 3);
  const int t = tp ? 2 : 1, c = cp ? 2 : 1;
  for (Gemm gemm : {Gemm::kOutput, Gemm::kGradInput, Gemm::kGradWeight}) {
    Float8Linears single(recipe, CpuCompute::Get(), nullptr, {});
    const std::array<Quantized, 2> whole = RunGemm(single, gemm, x, w, dy, {});
    // One tp group per cp rank, one cp group per tp rank.
    std::vector<MaxReductions> tp_logs(c), cp_logs(t);
    for (MaxReductions& log : tp_logs) log.now.resize(t);
    for (MaxReductions& log : cp_logs) log.now.resize(c);
    for (int pass = 0; pass < 3; ++pass) {
      for (MaxReductions& log : tp_logs) log.NextPass();
      for (MaxReductions& log : cp_logs) log.NextPass();
      for (int tr = 0; tr < t; ++tr) {
        for (int cr = 0; cr < c; ++cr) {
          // Tokens [cr n / c, ...); W's out or in [tr / t, ...), and x's or dy's with it.
          const int64_t nl = n / c, il = row_parallel ? in / t : in,
                        ol = row_parallel ? out : out / t;
          const int64_t i0 = row_parallel ? tr * il : 0, o0 = row_parallel ? 0 : tr * ol;
          ReplayedMaxGroup tp_group(tp_logs[cr], tr, t), cp_group(cp_logs[tr], cr, c);
          const Float8Split split{row_parallel, tp ? &tp_group : nullptr, cp ? &cp_group : nullptr};
          Float8Linears rank(recipe, CpuCompute::Get(), nullptr, {});
          const std::array<Quantized, 2> piece =
              RunGemm(rank, gemm, x.Block(cr * nl, nl, i0, il), w.Block(o0, ol, i0, il),
                      dy.Block(cr * nl, nl, o0, ol), split);
          if (pass < 2) continue;
          // Each operand's rows and k, as Float8Gemm takes it, and who splits them.
          const bool in_split = tp && row_parallel, out_split = tp && !row_parallel;
          struct Dims {
            bool rows_tp, rows_cp, k_tp, k_cp;
          };
          const Dims dims[2] = {gemm == Gemm::kOutput      ? Dims{false, cp, in_split, false}
                                : gemm == Gemm::kGradInput ? Dims{false, cp, out_split, false}
                                                           : Dims{out_split, false, false, cp},
                                gemm == Gemm::kOutput      ? Dims{out_split, false, in_split, false}
                                : gemm == Gemm::kGradInput ? Dims{in_split, false, out_split, false}
                                                           : Dims{in_split, false, false, cp}};
          for (int o = 0; o < 2; ++o) {
            const Dims& d = dims[o];
            ExpectPieceOfWhole(
                whole[o], piece[o],
                d.rows_tp   ? t
                : d.rows_cp ? c
                            : 1,
                d.k_tp   ? t
                : d.k_cp ? c
                         : 1,
                d.rows_tp   ? tr
                : d.rows_cp ? cr
                            : 0,
                d.k_tp   ? tr
                : d.k_cp ? cr
                         : 0,
                absl::StrCat(Name(gemm), " operand ", o, row_parallel ? " row" : " column",
                             "-parallel, tp rank ", tr, ", cp rank ", cr));
          }
        }
      }
    }
  }
}

TEST(Float8Split, TensorParallelPiecesQuantizeAsTheWholeOperands) {
  for (bool row_parallel : {false, true}) {
    CheckSplit(TensorwiseTestPlugin().Recipe(), row_parallel, true, false);
    CheckSplit(Rowwise(), row_parallel, true, false);
  }
}

TEST(Float8Split, ContextParallelTokensQuantizeAsTheWholeBatch) {
  CheckSplit(TensorwiseTestPlugin().Recipe(), false, false, true);
  CheckSplit(Rowwise(), false, false, true);
}

TEST(Float8Split, TensorAndContextParallelTogether) {
  for (bool row_parallel : {false, true}) {
    CheckSplit(TensorwiseTestPlugin().Recipe(), row_parallel, true, true);
    CheckSplit(Rowwise(), row_parallel, true, true);
  }
}

// Without the reductions each piece is scaled by its own amax: other codes. The test above
// would see it.
TEST(Float8Split, UnreducedPiecesQuantizeOtherwise) {
  const Matrix x = Random(32, 64, 1), w = Random(48, 64, 2), dy = Random(32, 48, 3);
  Float8Linears single(TensorwiseTestPlugin().Recipe(), CpuCompute::Get(), nullptr, {});
  const std::array<Quantized, 2> whole = RunGemm(single, Gemm::kOutput, x, w, dy, {});
  // One half of W holds its largest |w|; the other half's own scale is another.
  std::vector<std::vector<float>> scales;
  for (int64_t half : {0, 1}) {
    Float8Linears rank(TensorwiseTestPlugin().Recipe(), CpuCompute::Get(), nullptr, {});
    scales.push_back(RunGemm(rank, Gemm::kOutput, x, w.Block(half * 24, 24, 0, 64),
                             dy.Block(0, 32, half * 24, 24), {})[1]
                         .scales);
  }
  EXPECT_TRUE(scales[0] != whole[1].scales || scales[1] != whole[1].scales);
  EXPECT_NE(scales[0], scales[1]);
}

}  // namespace
}  // namespace titan
