// The layer kernels with bf16 activations (the kernel table: an activation operand is f32 or
// bf16, read into f32, the f32 kernel's arithmetic, what is written rounded once): for every
// combination of the dtypes a kernel allows, each bf16 result is the f32 kernel's result on the
// widened values rounded to nearest even, bit for bit, and each f32 result is the f32 kernel's.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/cpu/cpu_compute.h"
#include "titan/float16.h"

namespace titan {
namespace {

constexpr int kFixed = -1;

// An operand: its shape and initial values, and either a fixed dtype (kFixed group) or a group
// of operands whose dtype the test varies together (f32 or bf16).
struct Operand {
  std::vector<int64_t> shape;
  int group = kFixed;
  DType fixed = DType::kF32;
  std::vector<float> initial;  // as f32; an i32 operand's are whole numbers
};

int64_t Count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  return n;
}

// Storage of one operand in one dtype.
struct Buffer {
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<float> f32;
  std::vector<uint16_t> bf16;
  std::vector<int32_t> i32;

  Buffer(DType type, const Operand& o) : dtype(type), shape(o.shape) {
    for (float v : o.initial) {
      if (dtype == DType::kF32) f32.push_back(v);
      if (dtype == DType::kBF16) bf16.push_back(F32ToBf16(v));
      if (dtype == DType::kI32) i32.push_back(static_cast<int32_t>(v));
    }
  }
  TensorView view() {
    void* data = dtype == DType::kF32    ? static_cast<void*>(f32.data())
                 : dtype == DType::kBF16 ? static_cast<void*>(bf16.data())
                                         : static_cast<void*>(i32.data());
    return TensorView{data, dtype, Device{}, shape, {}};
  }
};

using Kernel = std::function<absl::Status(Compute&, std::vector<TensorView>&)>;

// Runs `kernel` once per combination of the groups' dtypes and once on f32 copies of the
// operands (the fixed ones as they are); compares every operand afterwards.
void ExpectTheF32KernelRoundedOnce(const std::string& name, const std::vector<Operand>& operands,
                                   int groups, const Kernel& kernel) {
  Compute& compute = CpuCompute::Get();
  for (int mask = 1; mask < (1 << groups); ++mask) {
    std::vector<Buffer> mixed, wide;
    std::string dtypes;
    for (const Operand& o : operands) {
      const bool bf16 = o.group != kFixed && ((mask >> o.group) & 1) != 0;
      mixed.emplace_back(o.group == kFixed ? o.fixed : (bf16 ? DType::kBF16 : DType::kF32), o);
      // The f32 run starts from the values the mixed run reads: bf16 operands' rounded ones.
      Operand widened = o;
      if (bf16) {
        for (float& v : widened.initial) v = Bf16ToF32(F32ToBf16(v));
      }
      wide.emplace_back(o.group == kFixed ? o.fixed : DType::kF32, widened);
      dtypes += std::string(DTypeName(mixed.back().dtype)) + " ";
    }
    std::vector<TensorView> mixed_views, wide_views;
    for (Buffer& b : mixed) mixed_views.push_back(b.view());
    for (Buffer& b : wide) wide_views.push_back(b.view());
    ASSERT_TRUE(kernel(compute, mixed_views).ok()) << name << " " << dtypes;
    ASSERT_TRUE(kernel(compute, wide_views).ok()) << name << " (f32)";
    for (size_t i = 0; i < operands.size(); ++i) {
      if (mixed[i].dtype == DType::kBF16 && wide[i].dtype == DType::kF32) {
        for (size_t j = 0; j < mixed[i].bf16.size(); ++j) {
          ASSERT_EQ(mixed[i].bf16[j], F32ToBf16(wide[i].f32[j]))
              << name << " " << dtypes << "operand " << i << " element " << j;
        }
      } else if (mixed[i].dtype == DType::kF32) {
        ASSERT_EQ(mixed[i].f32, wide[i].f32) << name << " " << dtypes << "operand " << i;
      }
    }
  }
}

std::vector<float> Random(int64_t n, uint32_t seed, float low = -2.0f, float high = 2.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(low, high);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = uniform(rng);
  return x;
}

Operand Activation(std::vector<int64_t> shape, int group, uint32_t seed) {
  const int64_t n = Count(shape);
  return Operand{std::move(shape), group, DType::kF32, Random(n, seed)};
}
Operand F32(std::vector<int64_t> shape, uint32_t seed, float low = -2.0f, float high = 2.0f) {
  const int64_t n = Count(shape);
  return Operand{std::move(shape), kFixed, DType::kF32, Random(n, seed, low, high)};
}

// 5 rows of 37 features: more than one vector of any width, and a partial one.
constexpr int64_t kRows = 5, kWidth = 37;

TEST(CpuActivations, RmsNorm) {
  ExpectTheF32KernelRoundedOnce("RmsNormForward",
                                {Activation({kRows, kWidth}, 0, 1), F32({kWidth}, 2),
                                 Activation({kRows, kWidth}, 1, 3), F32({kRows}, 4)},
                                2, [](Compute& c, std::vector<TensorView>& x) {
                                  return c.RmsNormForward(x[0], x[1], 1e-5, x[2], x[3]);
                                });
  ExpectTheF32KernelRoundedOnce(
      "RmsNormBackward",
      {Activation({kRows, kWidth}, 0, 5), Activation({kRows, kWidth}, 1, 6), F32({kWidth}, 7),
       F32({kRows}, 8, 0.5f, 2.0f), Activation({kRows, kWidth}, 2, 9), F32({kWidth}, 10)},
      3, [](Compute& c, std::vector<TensorView>& x) {
        return c.RmsNormBackward(x[0], x[1], x[2], x[3], x[4], x[5]);
      });
}

TEST(CpuActivations, Rope) {
  const int64_t b = 2, t = 3, heads = 2, hd = 6;
  for (bool forward : {true, false}) {
    ExpectTheF32KernelRoundedOnce(
        forward ? "RopeForward" : "RopeBackward",
        {F32({t, hd / 2}, 11, -1.0f, 1.0f), F32({t, hd / 2}, 12, -1.0f, 1.0f),
         Activation({b, t, heads, hd}, 0, 13)},
        1, [forward](Compute& c, std::vector<TensorView>& x) {
          return forward ? c.RopeForward(x[0], x[1], x[2]) : c.RopeBackward(x[0], x[1], x[2]);
        });
  }
}

TEST(CpuActivations, SwiGlu) {
  ExpectTheF32KernelRoundedOnce(
      "SwiGluForward",
      {Activation({kRows, kWidth}, 0, 14), Activation({kRows, kWidth}, 0, 15),
       Activation({kRows, kWidth}, 1, 16)},
      2, [](Compute& c, std::vector<TensorView>& x) { return c.SwiGluForward(x[0], x[1], x[2]); });
  ExpectTheF32KernelRoundedOnce(
      "SwiGluBackward",
      {Activation({kRows, kWidth}, 0, 17), Activation({kRows, kWidth}, 1, 18),
       Activation({kRows, kWidth}, 1, 19), Activation({kRows, kWidth}, 2, 20),
       Activation({kRows, kWidth}, 2, 21)},
      3, [](Compute& c, std::vector<TensorView>& x) {
        return c.SwiGluBackward(x[0], x[1], x[2], x[3], x[4]);
      });
}

TEST(CpuActivations, Embedding) {
  // Tokens of rows [3, 9) of the vocabulary and one outside it.
  const Operand tokens{{6}, kFixed, DType::kI32, {3, 8, 4, 3, 12, 5}};
  ExpectTheF32KernelRoundedOnce("EmbeddingForward",
                                {tokens, F32({6, kWidth}, 22), Activation({6, kWidth}, 0, 23)}, 1,
                                [](Compute& c, std::vector<TensorView>& x) {
                                  return c.EmbeddingForward(x[0], x[1], 3, x[2]);
                                });
  ExpectTheF32KernelRoundedOnce("EmbeddingBackward",
                                {tokens, Activation({6, kWidth}, 0, 24), F32({6, kWidth}, 25)}, 1,
                                [](Compute& c, std::vector<TensorView>& x) {
                                  return c.EmbeddingBackward(x[0], x[1], 3, x[2]);
                                });
}

TEST(CpuActivations, AccumulateFillAndGemm) {
  ExpectTheF32KernelRoundedOnce(
      "Accumulate", {Activation({kRows, kWidth}, 0, 26), Activation({kRows, kWidth}, 1, 27)}, 2,
      [](Compute& c, std::vector<TensorView>& x) { return c.Accumulate(x[0], x[1]); });
  for (float value : {1.3f, 0.0f, -0.0f}) {
    ExpectTheF32KernelRoundedOnce(
        "Fill", {Activation({kRows, kWidth}, 0, 28)}, 1,
        [value](Compute& c, std::vector<TensorView>& x) { return c.Fill(x[0], value); });
  }
  // bf16 a and b: c of either dtype, beta 0 (c written) and 0.5 (c read).
  const Operand a{{7, 19}, kFixed, DType::kBF16, Random(7 * 19, 29)};
  const Operand b{{19, 6}, kFixed, DType::kBF16, Random(19 * 6, 30)};
  for (float beta : {0.0f, 0.5f}) {
    ExpectTheF32KernelRoundedOnce("Gemm", {a, b, Activation({7, 6}, 0, 31)}, 1,
                                  [beta](Compute& c, std::vector<TensorView>& x) {
                                    return c.Gemm(x[0], false, x[1], false, 1.5f, beta, x[2]);
                                  });
  }
}

TEST(CpuActivations, AttentionInEitherMatmulPrecision) {
  // 2 sequences of 9 queries over 11 keys (a chunk of context parallelism's ring: offsets), 4
  // heads over 2 kv heads of 8.
  for (DType matmul : {DType::kF32, DType::kBF16}) {
    const AttentionSpec spec{2, 9, 11, 4, 2, 8, 6, 4, matmul};
    const int64_t q = 2 * 9 * 4 * 8, kv = 2 * 11 * 2 * 8, rows = 2 * 4 * 9;
    const std::string in = matmul == DType::kF32 ? " (f32 matmuls)" : " (bf16 matmuls)";
    ExpectTheF32KernelRoundedOnce(
        "AttentionForward" + in,
        {Activation({q}, 0, 40), Activation({kv}, 0, 41), Activation({kv}, 0, 42),
         Activation({q}, 0, 43), F32({rows}, 44)},
        1, [spec](Compute& c, std::vector<TensorView>& x) {
          return c.AttentionForward(spec, x[0], x[1], x[2], x[3], x[4]);
        });
    // The backward from a forward's own out and lse.
    std::vector<float> q_values = Random(q, 45), k_values = Random(kv, 46),
                       v_values = Random(kv, 47), out(q), lse(rows);
    ASSERT_TRUE(CpuCompute::Get()
                    .AttentionForward(spec,
                                      TensorView{q_values.data(), DType::kF32, Device{}, {q}, {}},
                                      TensorView{k_values.data(), DType::kF32, Device{}, {kv}, {}},
                                      TensorView{v_values.data(), DType::kF32, Device{}, {kv}, {}},
                                      TensorView{out.data(), DType::kF32, Device{}, {q}, {}},
                                      TensorView{lse.data(), DType::kF32, Device{}, {rows}, {}})
                    .ok());
    const auto act = [](std::vector<float> values) {
      const auto n = static_cast<int64_t>(values.size());
      return Operand{{n}, 0, DType::kF32, std::move(values)};
    };
    ExpectTheF32KernelRoundedOnce(
        "AttentionBackward" + in,
        {Activation({q}, 0, 48), act(q_values), act(k_values), act(v_values), act(out),
         Operand{{rows}, kFixed, DType::kF32, lse}, Activation({q}, 0, 49), Activation({kv}, 0, 50),
         Activation({kv}, 0, 51)},
        1, [spec](Compute& c, std::vector<TensorView>& x) {
          return c.AttentionBackward(spec, x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], x[8]);
        });
    ExpectTheF32KernelRoundedOnce(
        "AttentionMerge",
        {Activation({q}, 0, 52), F32({rows}, 53), Activation({q}, 0, 54), F32({rows}, 55)}, 1,
        [spec](Compute& c, std::vector<TensorView>& x) {
          return c.AttentionMerge(spec, x[0], x[1], x[2], x[3]);
        });
  }
}

TEST(CpuActivations, CrossEntropyPieces) {
  // 4 rows over columns [100, 137) of the vocabulary; one target elsewhere, one ignored.
  const Operand targets{{4}, kFixed, DType::kI32, {103, 136, 90, -100}};
  const Operand logits = Activation({4, kWidth}, 0, 60);
  ExpectTheF32KernelRoundedOnce(
      "CrossEntropyRowMax", {logits, F32({4}, 61)}, 1,
      [](Compute& c, std::vector<TensorView>& x) { return c.CrossEntropyRowMax(x[0], x[1]); });
  ExpectTheF32KernelRoundedOnce("CrossEntropySumExp", {logits, F32({4}, 62), F32({4}, 63)}, 1,
                                [](Compute& c, std::vector<TensorView>& x) {
                                  return c.CrossEntropySumExp(x[0], x[1], x[2]);
                                });
  ExpectTheF32KernelRoundedOnce("CrossEntropyTargetLogit", {logits, targets, F32({4}, 64)}, 1,
                                [](Compute& c, std::vector<TensorView>& x) {
                                  return c.CrossEntropyTargetLogit(x[0], x[1], 100, x[2]);
                                });
  ExpectTheF32KernelRoundedOnce(
      "CrossEntropyBackward",
      {logits, F32({4}, 65, 2.0f, 3.0f), targets, Activation({4, kWidth}, 1, 66)}, 2,
      [](Compute& c, std::vector<TensorView>& x) {
        return c.CrossEntropyBackward(x[0], x[1], x[2], 100, 0.5f, x[3]);
      });
  // In place: the gradient over the logits' own memory, in their dtype.
  ExpectTheF32KernelRoundedOnce("CrossEntropyBackward in place",
                                {logits, F32({4}, 67, 2.0f, 3.0f), targets}, 1,
                                [](Compute& c, std::vector<TensorView>& x) {
                                  return c.CrossEntropyBackward(x[0], x[1], x[2], 100, 0.5f, x[0]);
                                });
}

}  // namespace
}  // namespace titan
