// The operand checks both compute backends share (titan/compute_operands.h): for each kernel, a
// valid set of operands passes, and an operand on the wrong device, of the wrong dtype or of the
// wrong size is refused with a message naming the kernel and the operand.
#include "titan/compute_operands.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

namespace titan {
namespace {

using Views = std::vector<TensorView>;

struct Operand {
  const char* name;
  DType dtype;
  std::vector<int64_t> shape;
};

struct Probe {
  size_t operand;
  DType dtype;                 // for a dtype probe
  std::vector<int64_t> shape;  // for a size probe
  std::string message;
};

struct Case {
  std::vector<Operand> operands;
  std::function<absl::Status(const Views&, DeviceType)> check;
  Probe wrong_dtype, wrong_size;
  std::string kernel;
};

// The checks read no element: every operand points at the same bytes.
void* Bytes() {
  alignas(64) static char bytes[4096];
  return bytes;
}

Views Build(const Case& c, DeviceType device) {
  Views views;
  for (const Operand& o : c.operands) {
    views.push_back(TensorView{Bytes(), o.dtype, Device{device, 0}, o.shape, {}});
  }
  return views;
}

Probe Dtype(size_t operand, DType dtype, std::string message) {
  return {operand, dtype, {}, std::move(message)};
}
Probe Size(size_t operand, std::vector<int64_t> shape, std::string message) {
  return {operand, DType::kF32, std::move(shape), std::move(message)};
}

constexpr DType kF32 = DType::kF32, kBF16 = DType::kBF16, kI32 = DType::kI32;

// batch 1, seq_len 2, kv_len 3, 2 heads over 1 kv head of 4: q 16, k and v 12, lse 4 values.
const AttentionSpec kSpec{1, 2, 3, 2, 1, 4, 0, 0};

std::vector<Case> Cases() {
  const SgdUpdate momentum{.lr = 0.1, .momentum = 0.9};
  return {
      {{{"q", kF32, {16}},
        {"k", kF32, {12}},
        {"v", kF32, {12}},
        {"out", kF32, {16}},
        {"lse", kF32, {4}}},
       [](const Views& x, DeviceType d) {
         return CheckAttentionForwardOperands(kSpec, x[0], x[1], x[2], x[3], x[4], d);
       },
       Dtype(3, kI32, "AttentionForward: operand 'out' expected f32, found i32"),
       Size(4, {5}, "AttentionForward: operand 'lse' expected 4 elements, found 5"),
       "AttentionForward"},
      {{{"dout", kF32, {16}},
        {"q", kF32, {16}},
        {"k", kF32, {12}},
        {"v", kF32, {12}},
        {"out", kF32, {16}},
        {"lse", kF32, {4}},
        {"dq", kF32, {16}},
        {"dk", kF32, {12}},
        {"dv", kF32, {12}}},
       [](const Views& x, DeviceType d) {
         return CheckAttentionBackwardOperands(kSpec, x[0], x[1], x[2], x[3], x[4], x[5], x[6],
                                               x[7], x[8], d);
       },
       Dtype(7, kBF16, "AttentionBackward: operand 'dk' expected f32, found bf16"),
       Size(8, {11}, "AttentionBackward: operand 'dv' expected 12 elements, found 11"),
       "AttentionBackward"},
      {{{"part_out", kF32, {16}}, {"part_lse", kF32, {4}}, {"out", kF32, {16}}, {"lse", kF32, {4}}},
       [](const Views& x, DeviceType d) {
         return CheckAttentionMergeOperands(kSpec, x[0], x[1], x[2], x[3], d);
       },
       Dtype(1, kBF16, "AttentionMerge: operand 'part_lse' expected f32, found bf16"),
       Size(2, {15}, "AttentionMerge: operand 'out' expected 16 elements, found 15"),
       "AttentionMerge"},
      {{{"inp", kF32, {3, 4}}, {"weight", kF32, {4}}, {"out", kF32, {3, 4}}, {"rstd", kF32, {3}}},
       [](const Views& x, DeviceType d) {
         return CheckRmsNormForwardOperands(x[0], x[1], x[2], x[3], d);
       },
       Dtype(1, kBF16, "RmsNormForward: operand 'weight' expected f32, found bf16"),
       Size(3, {4}, "RmsNormForward: operand 'rstd' expected 3 elements, found 4"),
       "RmsNormForward"},
      {{{"dout", kF32, {3, 4}},
        {"inp", kF32, {3, 4}},
        {"weight", kF32, {4}},
        {"rstd", kF32, {3}},
        {"dinp", kF32, {3, 4}},
        {"dweight", kF32, {4}}},
       [](const Views& x, DeviceType d) {
         return CheckRmsNormBackwardOperands(x[0], x[1], x[2], x[3], x[4], x[5], d);
       },
       Dtype(4, DType::kF16, "RmsNormBackward: operand 'dinp' expected f32 or bf16, found f16"),
       Size(5, {3}, "RmsNormBackward: operand 'dweight' expected 4 elements, found 3"),
       "RmsNormBackward"},
      {{{"cos", kF32, {3, 2}}, {"sin", kF32, {3, 2}}},
       [](const Views& x, DeviceType d) {
         return CheckRopeTableOperands(RopeSpec{.head_dim = 4}, x[0], x[1], d);
       },
       Dtype(1, kBF16, "RopeTable: operand 'sin' expected f32, found bf16"),
       Size(1, {5}, "RopeTable: operand 'sin' expected 6 elements, found 5"),
       "RopeTable"},
      {{{"cos", kF32, {2, 2}}, {"sin", kF32, {2, 2}}, {"x", kF32, {1, 2, 3, 4}}},
       [](const Views& x, DeviceType d) {
         return CheckRopeOperands("RopeForward", x[0], x[1], x[2], d);
       },
       Dtype(2, kI32, "RopeForward: operand 'x' expected f32 or bf16, found i32"),
       Size(0, {3}, "RopeForward: operand 'cos' expected 4 elements, found 3"),
       "RopeForward"},
      {{{"a", kF32, {6}}, {"b", kF32, {6}}, {"out", kF32, {6}}},
       [](const Views& x, DeviceType d) { return CheckSwiGluForwardOperands(x[0], x[1], x[2], d); },
       Dtype(1, kBF16, "SwiGluForward: operand 'b' expected f32 as 'a', found bf16"),
       Size(2, {5}, "SwiGluForward: operand 'out' expected 6 elements, found 5"),
       "SwiGluForward"},
      {{{"dout", kF32, {6}},
        {"a", kF32, {6}},
        {"b", kF32, {6}},
        {"da", kF32, {6}},
        {"db", kF32, {6}}},
       [](const Views& x, DeviceType d) {
         return CheckSwiGluBackwardOperands(x[0], x[1], x[2], x[3], x[4], d);
       },
       Dtype(4, DType::kF16, "SwiGluBackward: operand 'db' expected f32 or bf16, found f16"),
       Size(0, {7}, "SwiGluBackward: operand 'dout' expected 6 elements, found 7"),
       "SwiGluBackward"},
      {{{"tokens", kI32, {3}}, {"table", kF32, {5, 4}}, {"out", kF32, {3, 4}}},
       [](const Views& x, DeviceType d) {
         return CheckEmbeddingForwardOperands(x[0], x[1], x[2], d);
       },
       Dtype(0, DType::kI64, "EmbeddingForward: operand 'tokens' expected i32, found i64"),
       Size(2, {11}, "EmbeddingForward: operand 'out' expected 12 elements, found 11"),
       "EmbeddingForward"},
      {{{"tokens", kI32, {3}}, {"dout", kF32, {3, 4}}, {"dtable", kF32, {5, 4}}},
       [](const Views& x, DeviceType d) {
         return CheckEmbeddingBackwardOperands(x[0], x[1], x[2], d);
       },
       Dtype(2, kBF16, "EmbeddingBackward: operand 'dtable' expected f32, found bf16"),
       Size(1, {13}, "EmbeddingBackward: operand 'dout' expected 12 elements, found 13"),
       "EmbeddingBackward"},
      {{{"logits", kF32, {3, 5}}, {"max", kF32, {3}}},
       [](const Views& x, DeviceType d) { return CheckCrossEntropyRowMaxOperands(x[0], x[1], d); },
       Dtype(0, kI32, "CrossEntropyRowMax: operand 'logits' expected f32 or bf16, found i32"),
       Size(1, {2}, "CrossEntropyRowMax: operand 'max' expected 3 elements, found 2"),
       "CrossEntropyRowMax"},
      {{{"logits", kF32, {3, 5}}, {"max", kF32, {3}}, {"sum", kF32, {3}}},
       [](const Views& x, DeviceType d) {
         return CheckCrossEntropySumExpOperands(x[0], x[1], x[2], d);
       },
       Dtype(2, kI32, "CrossEntropySumExp: operand 'sum' expected f32, found i32"),
       Size(2, {4}, "CrossEntropySumExp: operand 'sum' expected 3 elements, found 4"),
       "CrossEntropySumExp"},
      {{{"logits", kF32, {3, 5}}, {"targets", kI32, {3}}, {"target", kF32, {3}}},
       [](const Views& x, DeviceType d) {
         return CheckCrossEntropyTargetLogitOperands(x[0], x[1], x[2], d);
       },
       Dtype(1, kF32, "CrossEntropyTargetLogit: operand 'targets' expected i32, found f32"),
       Size(2, {2}, "CrossEntropyTargetLogit: operand 'target' expected 3 elements, found 2"),
       "CrossEntropyTargetLogit"},
      {{{"max", kF32, {3}},
        {"target", kF32, {3}},
        {"targets", kI32, {3}},
        {"sum_to_lse", kF32, {3}},
        {"loss", kF32, {1}}},
       [](const Views& x, DeviceType d) {
         return CheckCrossEntropyFinishOperands(x[0], x[1], x[2], x[3], x[4], d);
       },
       Dtype(4, kBF16, "CrossEntropyFinish: operand 'loss' expected f32, found bf16"),
       Size(4, {2}, "CrossEntropyFinish: operand 'loss' expected 1 elements, found 2"),
       "CrossEntropyFinish"},
      {{{"logits", kF32, {3, 5}},
        {"lse", kF32, {3}},
        {"targets", kI32, {3}},
        {"dlogits", kF32, {3, 5}}},
       [](const Views& x, DeviceType d) {
         return CheckCrossEntropyBackwardOperands(x[0], x[1], x[2], x[3], d);
       },
       Dtype(1, kBF16, "CrossEntropyBackward: operand 'lse' expected f32, found bf16"),
       Size(3, {14}, "CrossEntropyBackward: operand 'dlogits' expected 15 elements, found 14"),
       "CrossEntropyBackward"},
      // MoE: n 3 tokens, E 4 experts, k 2 (m 6 assignments), d 5 features.
      {{{"logits", kF32, {3, 4}},
        {"bias", kF32, {4}},
        {"experts", kI32, {3, 2}},
        {"weights", kF32, {3, 2}}},
       [](const Views& x, DeviceType d) {
         return CheckMoeRouteOperands(x[0], x[1], MoeRouting{.top_k = 2}, x[2], x[3], d);
       },
       Dtype(2, kF32, "MoeRoute: operand 'experts' expected i32, found f32"),
       Size(3, {5}, "MoeRoute: operand 'weights' expected 6 elements, found 5"),
       "MoeRoute"},
      {{{"logits", kF32, {3, 4}},
        {"experts", kI32, {3, 2}},
        {"d_weights", kF32, {3, 2}},
        {"d_logits", kF32, {3, 4}}},
       [](const Views& x, DeviceType d) {
         return CheckMoeRouteBackwardOperands(x[0], x[1], x[2], MoeRouting{.top_k = 2}, x[3], d);
       },
       Dtype(1, kF32, "MoeRouteBackward: operand 'experts' expected i32, found f32"),
       Size(3, {3, 3}, "MoeRouteBackward: operand 'd_logits' expected 12 elements, found 9"),
       "MoeRouteBackward"},
      {{{"experts", kI32, {3, 2}}, {"counts", kI32, {4}}, {"slots", kI32, {6}}},
       [](const Views& x, DeviceType d) { return CheckMoePermuteOperands(x[0], x[1], x[2], d); },
       Dtype(1, kF32, "MoePermute: operand 'counts' expected i32, found f32"),
       Size(2, {5}, "MoePermute: operand 'slots' expected 6 elements, found 5"),
       "MoePermute"},
      {{{"x", kBF16, {3, 5}}, {"slots", kI32, {6}}, {"out", kBF16, {6, 5}}},
       [](const Views& x, DeviceType d) { return CheckMoeDispatchOperands(x[0], x[1], x[2], d); },
       Dtype(2, kF32, "MoeDispatch: operand 'out' expected bf16, found f32"),
       Size(1, {7},
            "MoeDispatch: operand 'slots' expected a multiple of 3 assignments (k per token), "
            "found 7"),
       "MoeDispatch"},
      {{{"d_out", kF32, {6, 5}}, {"slots", kI32, {6}}, {"dx", kF32, {3, 5}}},
       [](const Views& x, DeviceType d) {
         return CheckMoeDispatchBackwardOperands(x[0], x[1], x[2], d);
       },
       Dtype(2, kBF16, "MoeDispatchBackward: operand 'dx' expected f32, found bf16"),
       Size(2, {3, 4}, "MoeDispatchBackward: operand 'dx' expected 15 elements, found 12"),
       "MoeDispatchBackward"},
      {{{"y", kF32, {6, 5}},
        {"weights", kF32, {3, 2}},
        {"slots", kI32, {6}},
        {"out", kF32, {3, 5}}},
       [](const Views& x, DeviceType d) {
         return CheckMoeCombineOperands(x[0], x[1], x[2], x[3], d);
       },
       Dtype(1, kBF16, "MoeCombine: operand 'weights' expected f32, found bf16"),
       Size(3, {4, 5},
            "MoeCombine: operand 'slots' expected a multiple of 4 assignments (k per token), "
            "found 6"),
       "MoeCombine"},
      {{{"d_out", kF32, {3, 5}},
        {"y", kF32, {6, 5}},
        {"weights", kF32, {3, 2}},
        {"slots", kI32, {6}},
        {"d_y", kF32, {6, 5}},
        {"d_weights", kF32, {3, 2}}},
       [](const Views& x, DeviceType d) {
         return CheckMoeCombineBackwardOperands(x[0], x[1], x[2], x[3], x[4], x[5], d);
       },
       Dtype(3, kF32, "MoeCombineBackward: operand 'slots' expected i32, found f32"),
       Size(4, {6, 4}, "MoeCombineBackward: operand 'd_y' expected 30 elements, found 24"),
       "MoeCombineBackward"},
      {{{"params", kF32, {6}},
        {"grads", kF32, {6}},
        {"exp_avg", kF32, {6}},
        {"exp_avg_sq", kF32, {6}}},
       [](const Views& x, DeviceType d) {
         return CheckAdamStepOperands(x[0], x[1], x[2], x[3], d);
       },
       Dtype(3, kBF16, "AdamStep: operand 'exp_avg_sq' expected f32, found bf16"),
       Size(1, {5}, "AdamStep: operand 'grads' expected 6 elements, found 5"),
       "AdamStep"},
      {{{"params", kF32, {6}}, {"grads", kF32, {6}}, {"momentum_buffer", kF32, {6}}},
       [momentum](const Views& x, DeviceType d) {
         return CheckSgdStepOperands(momentum, x[0], x[1], x[2], d);
       },
       Dtype(2, kBF16, "SgdStep: operand 'momentum_buffer' expected f32, found bf16"),
       Size(2, {5}, "SgdStep: operand 'momentum_buffer' expected 6 elements, found 5"),
       "SgdStep"},
      {{{"tensors", kF32, {3}}, {"tensors", kF32, {2}}, {"out", kF32, {2}}},
       [](const Views& x, DeviceType d) {
         const double weights[] = {1.0, 0.5};
         return CheckSumOfSquaresOperands(std::span(x.data(), 2), weights, x[2], d);
       },
       Dtype(1, kBF16, "SumOfSquares: operand 'tensors' expected f32, found bf16"),
       Size(2, {3}, "SumOfSquares: operand 'out' expected 2 elements, found 3"),
       "SumOfSquares"},
      {{{"src", kF32, {4}}, {"dst", kBF16, {4}}},
       [](const Views& x, DeviceType d) { return CheckCastOperands(x[0], x[1], d); },
       Dtype(1, kI32, "Cast: expected f32, bf16 or f16, found f32 -> i32"),
       Size(1, {3}, "Cast: operand 'dst' expected 4 elements, found 3"),
       "Cast"},
      {{{"x", kF32, {4}}, {"out", kF32, {4}}},
       [](const Views& x, DeviceType d) { return CheckAccumulateOperands(x[0], x[1], d); },
       Dtype(0, kI32, "Accumulate: operand 'x' expected f32 or bf16, found i32"),
       Size(0, {3}, "Accumulate: operand 'x' expected 4 elements, found 3"),
       "Accumulate"},
      {{{"src", kBF16, {4}}, {"dst", kBF16, {4}}},
       [](const Views& x, DeviceType d) { return CheckCopyOperands(x[0], x[1], d); },
       Dtype(1, kF32, "Copy: operand 'dst' expected bf16, found f32"),
       Size(1, {5}, "Copy: operand 'dst' expected 4 elements, found 5"),
       "Copy"},
  };
}

TEST(ComputeOperands, ValidOperandsPassOnEitherDevice) {
  for (const Case& c : Cases()) {
    for (DeviceType device : {DeviceType::kCpu, DeviceType::kCuda}) {
      const absl::Status status = c.check(Build(c, device), device);
      EXPECT_TRUE(status.ok()) << c.kernel << ": " << status;
    }
  }
}

TEST(ComputeOperands, AnOperandOnAnotherDeviceIsNamed) {
  for (const Case& c : Cases()) {
    for (size_t i = 0; i < c.operands.size(); ++i) {
      Views views = Build(c, DeviceType::kCpu);
      views[i].device = Device{DeviceType::kCuda, 1};
      const absl::Status status = c.check(views, DeviceType::kCpu);
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.kernel << " " << i;
      EXPECT_EQ(status.message(), c.kernel + ": operand '" + c.operands[i].name +
                                      "' is on cuda:1, but this compute runs on cpu:0");
    }
  }
}

TEST(ComputeOperands, AWrongDtypeOrSizeIsNamed) {
  for (const Case& c : Cases()) {
    for (const Probe& probe : {c.wrong_dtype, c.wrong_size}) {
      for (DeviceType device : {DeviceType::kCpu, DeviceType::kCuda}) {
        Views views = Build(c, device);
        TensorView& x = views[probe.operand];
        if (probe.shape.empty()) {
          x.dtype = probe.dtype;
        } else {
          x.shape = probe.shape;
        }
        const absl::Status status = c.check(views, device);
        EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.kernel;
        EXPECT_EQ(status.message(), probe.message);
      }
    }
  }
}

// The layer kernels' activations are f32 or bf16, each its own but where the table pairs them (a
// and b, da and db of SwiGLU); Gemm writes bf16 only from bf16 operands.
TEST(ComputeOperands, ActivationsAreF32OrBf16) {
  const auto view = [](DType dtype, std::vector<int64_t> shape) {
    return TensorView{Bytes(), dtype, Device{}, std::move(shape), {}};
  };
  constexpr DeviceType kCpu = DeviceType::kCpu;
  const TensorView w = view(kF32, {4}), rstd = view(kF32, {3});
  for (DType x : {kF32, kBF16}) {
    for (DType y : {kF32, kBF16}) {
      for (DType z : {kF32, kBF16}) {
        const TensorView a = view(x, {3, 4}), b = view(y, {3, 4}), c = view(z, {3, 4});
        EXPECT_TRUE(CheckRmsNormForwardOperands(a, w, b, rstd, kCpu).ok());
        EXPECT_TRUE(CheckRmsNormBackwardOperands(a, b, w, rstd, c, w, kCpu).ok());
        EXPECT_TRUE(CheckSwiGluForwardOperands(a, a, b, kCpu).ok());
        EXPECT_TRUE(CheckSwiGluBackwardOperands(a, b, b, c, c, kCpu).ok());
        EXPECT_TRUE(CheckAccumulateOperands(a, b, kCpu).ok());
      }
    }
    EXPECT_TRUE(CheckRopeOperands("RopeForward", view(kF32, {2, 2}), view(kF32, {2, 2}),
                                  view(x, {1, 2, 3, 4}), kCpu)
                    .ok());
    const TensorView tokens{Bytes(), kI32, Device{}, {3}, {}};
    EXPECT_TRUE(
        CheckEmbeddingForwardOperands(tokens, view(kF32, {5, 4}), view(x, {3, 4}), kCpu).ok());
    EXPECT_TRUE(
        CheckEmbeddingBackwardOperands(tokens, view(x, {3, 4}), view(kF32, {5, 4}), kCpu).ok());
  }
  EXPECT_EQ(CheckSwiGluBackwardOperands(view(kF32, {6}), view(kBF16, {6}), view(kBF16, {6}),
                                        view(kBF16, {6}), view(kF32, {6}), kCpu)
                .message(),
            "SwiGluBackward: operand 'db' expected bf16 as 'da', found f32");
  EXPECT_EQ(
      CheckRmsNormForwardOperands(view(DType::kF16, {3, 4}), w, view(kF32, {3, 4}), rstd, kCpu)
          .message(),
      "RmsNormForward: operand 'inp' expected f32 or bf16, found f16");
  EXPECT_EQ(CheckEmbeddingForwardOperands(TensorView{Bytes(), kI32, Device{}, {3}, {}},
                                          view(kBF16, {5, 4}), view(kBF16, {3, 4}), kCpu)
                .message(),
            "EmbeddingForward: operand 'table' expected f32, found bf16");
  EXPECT_TRUE(CheckGemmOperands(view(kBF16, {3, 4}), false, view(kBF16, {4, 2}), false,
                                view(kBF16, {3, 2}), kCpu)
                  .ok());
  EXPECT_EQ(CheckGemmOperands(view(kF32, {3, 4}), false, view(kF32, {4, 2}), false,
                              view(kBF16, {3, 2}), kCpu)
                .message(),
            "Gemm: operand 'c' expected f32 (or bf16 with bf16 a and b), found bf16 with f32 a");
  EXPECT_EQ(
      CheckGroupedGemmOperands(
          std::vector<GemmGroup>{{view(kBF16, {3, 4}), view(kBF16, {4, 2}), view(kBF16, {3, 2})}},
          false, false, kCpu)
          .message(),
      "GroupedGemm, group 0: operand 'c' expected f32, found bf16");
  // Attention's operands share q's dtype; the logits and their gradient are each their own but
  // in the same memory.
  const auto all = [&](DType t) {
    return CheckAttentionBackwardOperands(kSpec, view(t, {16}), view(t, {16}), view(t, {12}),
                                          view(t, {12}), view(t, {16}), view(kF32, {4}),
                                          view(t, {16}), view(t, {12}), view(t, {12}), kCpu);
  };
  EXPECT_TRUE(all(kBF16).ok());
  EXPECT_EQ(all(DType::kF16).message(),
            "AttentionBackward: operand 'q' expected f32 or bf16, found f16");
  EXPECT_EQ(
      CheckAttentionForwardOperands(kSpec, view(kBF16, {16}), view(kF32, {12}), view(kBF16, {12}),
                                    view(kBF16, {16}), view(kF32, {4}), kCpu)
          .message(),
      "AttentionForward: operand 'k' expected bf16, found f32");
  EXPECT_TRUE(CheckAttentionMergeOperands(kSpec, view(kBF16, {16}), view(kF32, {4}),
                                          view(kBF16, {16}), view(kF32, {4}), kCpu)
                  .ok());
  const TensorView targets{Bytes(), kI32, Device{}, {3}, {}};
  float elsewhere[12];
  const TensorView f32_grad{elsewhere, kF32, Device{}, {3, 4}, {}};
  EXPECT_TRUE(CheckCrossEntropyBackwardOperands(view(kBF16, {3, 4}), view(kF32, {3}), targets,
                                                f32_grad, kCpu)
                  .ok());
  EXPECT_TRUE(CheckCrossEntropyBackwardOperands(view(kBF16, {3, 4}), view(kF32, {3}), targets,
                                                view(kBF16, {3, 4}), kCpu)
                  .ok());
  EXPECT_EQ(CheckCrossEntropyBackwardOperands(view(kBF16, {3, 4}), view(kF32, {3}), targets,
                                              view(kF32, {3, 4}), kCpu)
                .message(),
            "CrossEntropyBackward: operand 'dlogits' expected bf16 as 'logits', found f32");
}

// RopeBackward checks what RopeForward does, under its own name.
TEST(ComputeOperands, RopeBackwardNamesItself) {
  float table[4], x[24];
  const auto view = [](float* data, std::vector<int64_t> shape) {
    return TensorView{data, DType::kF32, Device{}, std::move(shape), {}};
  };
  EXPECT_TRUE(CheckRopeOperands("RopeBackward", view(table, {2, 2}), view(table, {2, 2}),
                                view(x, {1, 2, 3, 4}), DeviceType::kCpu)
                  .ok());
  EXPECT_EQ(CheckRopeOperands("RopeBackward", view(table, {2, 2}), view(table, {3}),
                              view(x, {1, 2, 3, 4}), DeviceType::kCpu)
                .message(),
            "RopeBackward: operand 'sin' expected 4 elements, found 3");
}

// Without momentum SgdStep has no buffer to check; SumOfSquares wants one weight per tensor.
TEST(ComputeOperands, SgdWithoutMomentumAndSumOfSquaresWeights) {
  float data[6];
  const TensorView six{data, DType::kF32, Device{}, {6}, {}}, none{};
  EXPECT_TRUE(CheckSgdStepOperands(SgdUpdate{.lr = 0.1}, six, six, none, DeviceType::kCpu).ok());
  const TensorView two{data, DType::kF32, Device{}, {2}, {}};
  const TensorView tensors[] = {six, six};
  const double weights[] = {1.0};
  EXPECT_EQ(CheckSumOfSquaresOperands(tensors, weights, two, DeviceType::kCpu).message(),
            "SumOfSquares: 2 tensors need as many weights, found 1");
}

// AttentionMerge validates its spec as the other attention kernels do.
TEST(ComputeOperands, AttentionMergeRefusesAnInvalidSpec) {
  float data[16];
  const TensorView any{data, DType::kF32, Device{}, {16}, {}};
  AttentionSpec spec = kSpec;
  spec.batch = -1;
  EXPECT_EQ(CheckAttentionMergeOperands(spec, any, any, any, any, DeviceType::kCpu).message(),
            "AttentionMerge: expected non-negative batch, seq_len and kv_len and a positive "
            "head_dim, found -1, 2, 3, 4");
  spec = kSpec;
  spec.heads = 0;
  EXPECT_EQ(CheckAttentionMergeOperands(spec, any, any, any, any, DeviceType::kCpu).message(),
            "AttentionMerge: heads 0 must be a positive multiple of kv_heads 1");
}

// MoeRoute takes a bias with no data as none; a routing must fit the experts; MoePermute needs an
// expert; MoeDispatch moves f32 or bf16 rows, of no tokens too.
TEST(ComputeOperands, MoeBiasRoutingExpertsAndRows) {
  float data[32];
  const auto view = [&](std::vector<int64_t> shape, DType dtype = DType::kF32) {
    return TensorView{data, dtype, Device{}, std::move(shape), {}};
  };
  const TensorView logits = view({3, 4}), ids = view({3, 2}, DType::kI32), weights = view({3, 2});
  constexpr DeviceType kCpu = DeviceType::kCpu;
  EXPECT_TRUE(CheckMoeRouteOperands(logits, {}, {.top_k = 2}, ids, weights, kCpu).ok());
  EXPECT_EQ(CheckMoeRouteOperands(logits, view({3}), {.top_k = 2}, ids, weights, kCpu).message(),
            "MoeRoute: operand 'bias' expected 4 elements, found 3");
  MoeRouting unknown{.top_k = 2};
  unknown.score = static_cast<MoeRouting::Score>(7);
  EXPECT_EQ(CheckMoeRouteOperands(logits, {}, unknown, ids, weights, kCpu).message(),
            "MoeRoute: routing.score 7 is neither softmax nor sigmoid");
  EXPECT_EQ(
      CheckMoeRouteBackwardOperands(logits, ids, weights, {.top_k = 5}, logits, kCpu).message(),
      "MoeRouteBackward: routing.top_k 5 must be in [1, 4] (the experts)");
  EXPECT_EQ(
      CheckMoePermuteOperands(ids, view({0}, DType::kI32), view({6}, DType::kI32), kCpu).message(),
      "MoePermute: operand 'counts' expected at least one expert, found 0");
  EXPECT_EQ(CheckMoeDispatchOperands(view({3, 5}, DType::kF16), view({6}, DType::kI32),
                                     view({6, 5}, DType::kF16), kCpu)
                .message(),
            "MoeDispatch: operand 'x' expected f32 or bf16, found f16");
  EXPECT_TRUE(
      CheckMoeDispatchOperands(view({0, 5}), view({0}, DType::kI32), view({0, 5}), kCpu).ok());
  EXPECT_EQ(
      CheckMoeDispatchOperands(view({0, 5}), view({2}, DType::kI32), view({2, 5}), kCpu).message(),
      "MoeDispatch: operand 'slots' expected a multiple of 0 assignments (k per token), "
      "found 2");
}

// A size computed from bad inputs may be negative: it matches no operand, and neither does a
// shape with a negative extent (whose element count could be anything).
TEST(ComputeOperands, NegativeSizesMatchNothing) {
  float data[4];
  const TensorView empty{data, DType::kF32, Device{}, {0}, {}};
  EXPECT_EQ(ExpectOperand("K", "x", empty, DeviceType::kCpu, DType::kF32, -4).message(),
            "K: operand 'x' expected -4 elements, found 0");
  const TensorView negative{data, DType::kF32, Device{}, {-2, 2}, {}};
  EXPECT_EQ(ExpectOperand("K", "x", negative, DeviceType::kCpu, DType::kF32, -4).message(),
            "K: operand 'x' has a negative extent -2");
  EXPECT_EQ(ExpectOperand("K", "x", negative, DeviceType::kCpu, DType::kF32).message(),
            "K: operand 'x' has a negative extent -2");
  EXPECT_TRUE(ExpectOperand("K", "x", empty, DeviceType::kCpu, DType::kF32).ok());
}

}  // namespace
}  // namespace titan
