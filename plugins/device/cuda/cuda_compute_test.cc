// Every kernel of the CUDA compute against CpuCompute, the reference, on random inputs. Each
// test needs a GPU and skips without one; the first two run anywhere and check what a machine
// without a GPU gets.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/cpu/cpu_compute.h"
#include "core/runtime/plugin_registry.h"
#include "tests/support/plugin_dir.h"
#include "titan/device.h"
#include "titan/float16.h"

namespace titan {
namespace {

DevicePlugin& CudaDevicePlugin() {
  static auto registry = std::move(PluginRegistry::Discover({testing::TestPluginDir()})).value();
  static std::unique_ptr<DevicePlugin> device =
      std::move(registry->Create<DevicePlugin>("cuda")).value();
  return *device;
}

std::vector<float> Random(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

// gpu[i] within abs + rel * |cpu[i]| of cpu[i] (NaN must meet NaN, infinities must be equal).
void ExpectNear(const std::vector<float>& gpu, const std::vector<float>& cpu, double rel,
                double abs, const std::string& what) {
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < gpu.size(); ++i) {
    const bool same_special = (std::isnan(gpu[i]) && std::isnan(cpu[i])) || gpu[i] == cpu[i];
    if (same_special) continue;
    const double diff = std::fabs(static_cast<double>(gpu[i]) - cpu[i]);
    if (!(diff <= abs + rel * std::fabs(cpu[i])) && reported++ < 5) {
      ADD_FAILURE() << what << "[" << i << "]: gpu " << gpu[i] << " vs cpu " << cpu[i];
    }
  }
}

// One operand twice: in host memory for CpuCompute and in device memory for the CUDA compute.
class Twin {
 public:
  Twin(DType dtype, std::vector<int64_t> shape, const void* bytes)
      : dtype_(dtype), shape_(std::move(shape)) {
    host_.resize(Bytes());
    std::memcpy(host_.data(), bytes, Bytes());
    device_ = CudaDevicePlugin().Allocate(std::max<size_t>(Bytes(), 1)).value();
    EXPECT_TRUE(CudaDevicePlugin().CopyToDevice(device_, host_.data(), Bytes()).ok());
  }
  Twin(const Twin&) = delete;
  ~Twin() { CudaDevicePlugin().Free(device_).IgnoreError(); }

  TensorView cpu() { return TensorView{host_.data(), dtype_, Device{}, shape_, {}}; }
  TensorView gpu() { return TensorView{device_, dtype_, Device{DeviceType::kCuda, 0}, shape_, {}}; }
  // Both sides as f32 (bf16 and f16 widened), after the GPU's work is done.
  std::vector<float> Cpu() const { return Widen(host_.data()); }
  std::vector<float> Gpu() const {
    std::vector<uint8_t> bytes(Bytes());
    EXPECT_TRUE(CudaDevicePlugin().compute()->Synchronize().ok());
    EXPECT_TRUE(CudaDevicePlugin().CopyToHost(bytes.data(), device_, Bytes()).ok());
    return Widen(bytes.data());
  }
  std::vector<uint8_t> GpuBytes() const {
    std::vector<uint8_t> bytes(Bytes());
    EXPECT_TRUE(CudaDevicePlugin().compute()->Synchronize().ok());
    EXPECT_TRUE(CudaDevicePlugin().CopyToHost(bytes.data(), device_, Bytes()).ok());
    return bytes;
  }
  const std::vector<uint8_t>& CpuBytes() const { return host_; }

 private:
  size_t Bytes() const {
    int64_t n = 1;
    for (int64_t d : shape_) n *= d;
    return static_cast<size_t>(n) * DTypeSize(dtype_);
  }
  std::vector<float> Widen(const uint8_t* bytes) const {
    const size_t n = Bytes() / DTypeSize(dtype_);
    std::vector<float> out(n);
    for (size_t i = 0; i < n; ++i) {
      if (dtype_ == DType::kI32) {
        out[i] = static_cast<float>(reinterpret_cast<const int32_t*>(bytes)[i]);
      } else if (DTypeSize(dtype_) == 1) {
        out[i] = bytes[i];
      } else {
        out[i] = LoadAsF32(bytes, dtype_, static_cast<int64_t>(i));
      }
    }
    return out;
  }

  DType dtype_;
  std::vector<int64_t> shape_;
  std::vector<uint8_t> host_;
  void* device_ = nullptr;
};

Twin F32(const std::vector<float>& values, std::vector<int64_t> shape) {
  return Twin(DType::kF32, std::move(shape), values.data());
}
Twin Bf16(const std::vector<float>& values, std::vector<int64_t> shape) {
  std::vector<uint16_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i) bits[i] = F32ToBf16(values[i]);
  return Twin(DType::kBF16, std::move(shape), bits.data());
}
Twin I32(const std::vector<int32_t>& values) {
  return Twin(DType::kI32, {static_cast<int64_t>(values.size())}, values.data());
}
Twin Zeros(DType dtype, std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<uint8_t> zeros(static_cast<size_t>(n) * DTypeSize(dtype));
  return Twin(dtype, std::move(shape), zeros.data());
}

// The cuda device's job.attention ("auto", "cudnn" or "tiled").
void SetAttention(const std::string& mode) {
  ASSERT_TRUE(
      CudaDevicePlugin().Configure(ConfigView("job", {{"attention", {mode, "test"}}})).ok());
}

class CudaComputeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (CudaDevicePlugin().DeviceCount() == 0) {
      GTEST_SKIP() << "no CUDA device: this test compares the cuda compute with the cpu one and "
                      "runs where a GPU is present (tools/gpu-check)";
    }
    ASSERT_TRUE(CudaDevicePlugin().Select(0).ok());
    gpu_ = CudaDevicePlugin().compute();
    ASSERT_NE(gpu_, nullptr);
    // Titan's own attention kernels unless a test asks for cuDNN's (the f32 comparisons below
    // hold for them); job.attention's default, "auto", would pick by each spec's matmul_dtype.
    SetAttention("tiled");
  }
  Compute& cpu_ = CpuCompute::Get();
  Compute* gpu_ = nullptr;
};

#define BOTH(call_cpu, call_gpu)                \
  do {                                          \
    ASSERT_TRUE((call_cpu).ok());               \
    absl::Status gpu_status = (call_gpu);       \
    ASSERT_TRUE(gpu_status.ok()) << gpu_status; \
  } while (false)

TEST(CudaComputeWithoutGpu, TheFirstCallExplainsThatThereIsNoDevice) {
  DevicePlugin& device = CudaDevicePlugin();
  if (device.DeviceCount() > 0) GTEST_SKIP() << "a CUDA device is present; this checks its absence";
  Compute* compute = device.compute();
  ASSERT_NE(compute, nullptr);  // titan-run accepts job.device = "cuda" and fails at first use
  EXPECT_EQ(compute->device(), (Device{DeviceType::kCuda, 0}));
  EXPECT_NE(compute->Describe().find("cuda: no CUDA device visible;"), std::string::npos)
      << compute->Describe();
  TensorView empty{nullptr, DType::kF32, Device{DeviceType::kCuda, 0}, {0}, {}};
  absl::Status status = compute->Fill(empty, 1.0f);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("cuda: no CUDA device is visible to this process"),
            absl::string_view::npos)
      << status;
  EXPECT_FALSE(compute->Synchronize().ok());
  EXPECT_FALSE(compute->RecordEvent(compute->current_stream()).ok());
  // Operands are checked before the device is needed, so their errors read the same anywhere.
  float host = 0;
  status = compute->Fill(FlatF32(&host, 1), 1.0f);
  EXPECT_EQ(status.message(), "Fill: operand 'x' is on cpu:0, but this compute runs on cuda:0");
  TensorView ints{nullptr, DType::kI32, Device{DeviceType::kCuda, 0}, {0}, {}};
  EXPECT_EQ(compute->Scale(ints, 2.0f).message(), "Scale: operand 'x' expected f32, found i32");
}

TEST(CudaComputeWithoutGpu, TheTf32KeyAllowsTf32GemmsAndDefaultsToOff) {
  DevicePlugin& device = CudaDevicePlugin();
  const std::vector<ConfigKey> keys = device.ConfigKeys();
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_EQ(keys[0].name, "tf32");
  EXPECT_EQ(std::get<bool>(*keys[0].default_value), false);
  EXPECT_NE(device.compute()->Describe().find("TF32 off"), std::string::npos);
  ASSERT_TRUE(device.Configure(ConfigView("job", {{"tf32", {true, "recipe.toml:3:1"}}})).ok());
  EXPECT_NE(device.compute()->Describe().find("TF32 allowed"), std::string::npos);
  ASSERT_TRUE(device.Configure(ConfigView("job", {{"tf32", {false, "default"}}})).ok());
  EXPECT_NE(device.compute()->Describe().find("TF32 off"), std::string::npos);
}

// job.attention: auto by default; the Describe line names the choice; a wrong value is refused
// naming where it was set.
TEST(CudaComputeWithoutGpu, TheAttentionKeyChoosesCudnnOrTheTiledKernels) {
  DevicePlugin& device = CudaDevicePlugin();
  const std::vector<ConfigKey> keys = device.ConfigKeys();
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_EQ(keys[1].name, "attention");
  EXPECT_EQ(std::get<std::string>(*keys[1].default_value), "auto");
  EXPECT_EQ(keys[1].choices, (std::vector<std::string>{"auto", "cudnn", "tiled"}));
  const auto set = [&](const std::string& value) {
    return device.Configure(ConfigView("job", {{"attention", {value, "recipe.toml:4:1"}}}));
  };
  ASSERT_TRUE(set("auto").ok());
  EXPECT_NE(device.compute()->Describe().find("cuDNN's fused flash attention in bf16 where it "
                                              "applies in a bf16 run"),
            std::string::npos)
      << device.compute()->Describe();
  ASSERT_TRUE(set("tiled").ok());
  EXPECT_NE(device.compute()->Describe().find("job.attention = \"tiled\""), std::string::npos)
      << device.compute()->Describe();
  absl::Status wrong = set("flash");
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.message().find("recipe.toml:4:1: job.attention: \"flash\""), std::string::npos)
      << wrong;
  ASSERT_TRUE(set("auto").ok());
}

// Both computes check their operands through titan/compute_operands.h before they need a device,
// so each kernel refuses a wrong operand with the CPU's message, with or without a GPU.
TEST(CudaComputeOperands, EveryKernelRefusesAWrongOperandAsTheCpuDoes) {
  using Call = std::function<absl::Status(Compute&, DeviceType)>;
  // Nothing is read: every check below fails before a kernel would run.
  const auto v = [](DeviceType d, std::vector<int64_t> shape, DType dtype = DType::kF32) {
    static float bytes[64];
    return TensorView{bytes, dtype, Device{d, 0}, std::move(shape), {}};
  };
  constexpr DType kI32 = DType::kI32;
  const AttentionSpec spec{1, 2, 3, 2, 1, 4, 0, 0}, no_batch{-1, 2, 3, 2, 1, 4, 0, 0};
  const std::vector<std::pair<std::string, Call>> calls = {
      {"AttentionForward",
       [&](Compute& c, DeviceType d) {
         return c.AttentionForward(spec, v(d, {16}), v(d, {12}), v(d, {12}), v(d, {16}), v(d, {5}));
       }},
      {"AttentionBackward",
       [&](Compute& c, DeviceType d) {
         return c.AttentionBackward(spec, v(d, {16}), v(d, {16}), v(d, {12}), v(d, {12}),
                                    v(d, {16}), v(d, {4}), v(d, {16}), v(d, {12}), v(d, {11}));
       }},
      {"AttentionMerge",
       [&](Compute& c, DeviceType d) {
         return c.AttentionMerge(spec, v(d, {16}), v(d, {4}), v(d, {16}), v(d, {5}));
       }},
      {"AttentionMerge",
       [&](Compute& c, DeviceType d) {
         return c.AttentionMerge(no_batch, v(d, {16}), v(d, {4}), v(d, {16}), v(d, {4}));
       }},
      {"RmsNormForward",
       [&](Compute& c, DeviceType d) {
         return c.RmsNormForward(v(d, {3, 4}), v(d, {4}), 1e-5, v(d, {3, 4}), v(d, {4}));
       }},
      {"RmsNormBackward",
       [&](Compute& c, DeviceType d) {
         return c.RmsNormBackward(v(d, {3, 4}), v(d, {3, 4}), v(d, {4}), v(d, {3}), v(d, {3, 4}),
                                  v(d, {5}));
       }},
      {"RopeTable",
       [&](Compute& c, DeviceType d) {
         return c.RopeTable(RopeSpec{.head_dim = 6}, 0, v(d, {3, 2}), v(d, {3, 2}));
       }},
      {"RopeForward",
       [&](Compute& c, DeviceType d) {
         return c.RopeForward(v(d, {2, 2}), v(d, {3}), v(d, {1, 2, 3, 4}));
       }},
      {"RopeBackward",
       [&](Compute& c, DeviceType d) {
         return c.RopeBackward(v(d, {2, 2}), v(d, {2, 2}), v(d, {1, 2, 3, 4}, kI32));
       }},
      {"SwiGluForward",
       [&](Compute& c, DeviceType d) { return c.SwiGluForward(v(d, {6}), v(d, {6}), v(d, {5})); }},
      {"SwiGluBackward",
       [&](Compute& c, DeviceType d) {
         return c.SwiGluBackward(v(d, {6}), v(d, {6}), v(d, {6}), v(d, {6}), v(d, {5}));
       }},
      {"EmbeddingForward",
       [&](Compute& c, DeviceType d) {
         return c.EmbeddingForward(v(d, {3}, kI32), v(d, {5, 4}), 0, v(d, {11}));
       }},
      {"EmbeddingBackward",
       [&](Compute& c, DeviceType d) {
         return c.EmbeddingBackward(v(d, {3}), v(d, {12}), 0, v(d, {5, 4}));
       }},
      {"CrossEntropyRowMax",
       [&](Compute& c, DeviceType d) {
         return c.CrossEntropyRowMax(v(d, {3, 5}), v(d, {2}));
       }},
      {"CrossEntropySumExp",
       [&](Compute& c, DeviceType d) {
         return c.CrossEntropySumExp(v(d, {3, 5}), v(d, {3}), v(d, {2}));
       }},
      {"CrossEntropyTargetLogit",
       [&](Compute& c, DeviceType d) {
         return c.CrossEntropyTargetLogit(v(d, {3, 5}), v(d, {3}, kI32), 0, v(d, {2}));
       }},
      {"CrossEntropyFinish",
       [&](Compute& c, DeviceType d) {
         return c.CrossEntropyFinish(v(d, {3}), v(d, {3}), v(d, {3}, kI32), v(d, {3}), v(d, {2}));
       }},
      {"CrossEntropyBackward",
       [&](Compute& c, DeviceType d) {
         return c.CrossEntropyBackward(v(d, {3, 5}), v(d, {3}), v(d, {3}, kI32), 0, 1.0f,
                                       v(d, {14}));
       }},
      {"AdamStep",
       [&](Compute& c, DeviceType d) {
         return c.AdamStep(AdamUpdate{}, v(d, {6}), v(d, {6}), v(d, {6}), v(d, {5}));
       }},
      {"SgdStep",
       [&](Compute& c, DeviceType d) {
         return c.SgdStep(SgdUpdate{.momentum = 0.9}, v(d, {6}), v(d, {6}), v(d, {5}));
       }},
      {"SumOfSquares",
       [&](Compute& c, DeviceType d) {
         const TensorView tensors[] = {v(d, {3}), v(d, {2}, DType::kBF16)};
         const double weights[] = {1.0, 1.0};
         return c.SumOfSquares(tensors, weights, v(d, {2}));
       }},
      {"MoeRoute",
       [&](Compute& c, DeviceType d) {
         return c.MoeRoute(v(d, {3, 4}), {}, {.top_k = 5}, v(d, {3, 5}, kI32), v(d, {3, 5}));
       }},
      {"MoeRouteBackward",
       [&](Compute& c, DeviceType d) {
         return c.MoeRouteBackward(v(d, {3, 4}), v(d, {3, 2}, kI32), v(d, {3, 2}), {.top_k = 2},
                                   v(d, {3, 3}));
       }},
      {"MoePermute",
       [&](Compute& c, DeviceType d) {
         return c.MoePermute(v(d, {3, 2}, kI32), v(d, {4}, kI32), v(d, {5}, kI32));
       }},
      {"MoeDispatch",
       [&](Compute& c, DeviceType d) {
         return c.MoeDispatch(v(d, {3, 5}), v(d, {7}, kI32), v(d, {7, 5}));
       }},
      {"MoeDispatchBackward",
       [&](Compute& c, DeviceType d) {
         return c.MoeDispatchBackward(v(d, {6, 5}), v(d, {6}, kI32), v(d, {3, 4}));
       }},
      {"MoeCombine",
       [&](Compute& c, DeviceType d) {
         return c.MoeCombine(v(d, {6, 5}), v(d, {3, 2}, kI32), v(d, {6}, kI32), v(d, {3, 5}));
       }},
      {"MoeCombineBackward",
       [&](Compute& c, DeviceType d) {
         return c.MoeCombineBackward(v(d, {3, 5}), v(d, {6, 5}), v(d, {3, 2}), v(d, {6}, kI32),
                                     v(d, {6, 4}), v(d, {3, 2}));
       }},
      {"GroupedGemm",
       [&](Compute& c, DeviceType) { return c.GroupedGemm({}, false, false, 1.0f, 0.0f); }},
      {"GroupedGemm",
       [&](Compute& c, DeviceType d) {
         const std::vector<GemmGroup> same_c = {{v(d, {2, 2}), v(d, {2, 2}), v(d, {2, 2})},
                                                {v(d, {2, 2}), v(d, {2, 2}), v(d, {2, 2})}};
         return c.GroupedGemm(same_c, false, false, 1.0f, 0.0f);
       }},
      {"Cast", [&](Compute& c, DeviceType d) { return c.Cast(v(d, {4}), v(d, {4}, kI32)); }},
      {"Accumulate", [&](Compute& c, DeviceType d) { return c.Accumulate(v(d, {3}), v(d, {4})); }},
      {"Copy", [&](Compute& c, DeviceType d) { return c.Copy(v(d, {4}), v(d, {5})); }},
  };
  Compute& gpu = *CudaDevicePlugin().compute();
  for (const auto& [kernel, call] : calls) {
    const absl::Status cpu = call(CpuCompute::Get(), DeviceType::kCpu);
    const absl::Status cuda = call(gpu, DeviceType::kCuda);
    EXPECT_EQ(cpu.code(), absl::StatusCode::kInvalidArgument) << kernel << ": " << cpu;
    EXPECT_TRUE(absl::StartsWith(cpu.message(), kernel + ": ")) << cpu;
    EXPECT_EQ(std::string(cuda.message()), std::string(cpu.message())) << kernel;
  }
}

// f32 GEMMs: sums of k = 93 products of N(0, 1) values in another order than OpenBLAS's; 1e-5
// relative plus 5e-5 absolute (partial sums of size ~10 round at ~6e-7 per addition).
TEST_F(CudaComputeTest, GemmF32EveryTransposeMatchesTheCpu) {
  const int64_t m = 67, n = 45, k = 93;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      Twin a = F32(Random(m * k, 1), ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k});
      Twin b = F32(Random(k * n, 2), tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n});
      Twin c = F32(Random(m * n, 3), {m, n});
      BOTH(cpu_.Gemm(a.cpu(), ta, b.cpu(), tb, 0.5f, 2.0f, c.cpu()),
           gpu_->Gemm(a.gpu(), ta, b.gpu(), tb, 0.5f, 2.0f, c.gpu()));
      ExpectNear(c.Gpu(), c.Cpu(), 1e-5, 5e-5, absl::StrCat("c ta=", ta, " tb=", tb));
    }
  }
}

TEST_F(CudaComputeTest, GemmF32OnUnalignedViewsAndBetaZeroIgnoresNans) {
  const int64_t m = 5, n = 3, k = 7;
  std::vector<float> a_values = Random(m * k + 1, 4), b_values = Random(k * n + 1, 5);
  Twin a = F32(a_values, {m * k + 1});
  Twin b = F32(b_values, {k * n + 1});
  Twin c = F32(std::vector<float>(m * n + 1, std::numeric_limits<float>::quiet_NaN()), {m * n + 1});
  auto shifted = [](TensorView x, std::vector<int64_t> shape) {
    x.data = static_cast<float*>(x.data) + 1;  // 4-byte aligned only
    x.shape = std::move(shape);
    return x;
  };
  BOTH(cpu_.Gemm(shifted(a.cpu(), {m, k}), false, shifted(b.cpu(), {k, n}), false, 1.0f, 0.0f,
                 shifted(c.cpu(), {m, n})),
       gpu_->Gemm(shifted(a.gpu(), {m, k}), false, shifted(b.gpu(), {k, n}), false, 1.0f, 0.0f,
                  shifted(c.gpu(), {m, n})));
  std::vector<float> gpu = c.Gpu(), cpu = c.Cpu();
  for (int64_t i = 1; i <= m * n; ++i) ASSERT_FALSE(std::isnan(gpu[i])) << i;
  ExpectNear(gpu, cpu, 1e-5, 5e-5, "c");
}

// bf16 inputs: each product of two bf16 values is exact in f32, so the CPU's bf16 GEMM (oneDNN
// or its exact emulation) and cuBLASLt differ only in summation order: 1e-5 relative, 1e-4
// absolute.
TEST_F(CudaComputeTest, GemmBf16MatchesTheCpuBf16Gemm) {
  const int64_t m = 64, n = 48, k = 80;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      Twin a = Bf16(Random(m * k, 6), ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k});
      Twin b = Bf16(Random(k * n, 7), tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n});
      Twin c = F32(Random(m * n, 8), {m, n});
      BOTH(cpu_.Gemm(a.cpu(), ta, b.cpu(), tb, 1.0f, 1.0f, c.cpu()),
           gpu_->Gemm(a.gpu(), ta, b.gpu(), tb, 1.0f, 1.0f, c.gpu()));
      ExpectNear(c.Gpu(), c.Cpu(), 1e-5, 1e-4, absl::StrCat("c ta=", ta, " tb=", tb));
    }
  }
}

// Grouped GEMMs (cuBLAS's cublasGemmGroupedBatchedEx) against the CPU's, one GEMM per group, for
// every transpose: three groups of their own shapes, as a mixture of experts' experts; f32 at the
// f32 GEMM's tolerance, bf16 at the bf16 GEMM's. The memory between the groups' outputs stays.
TEST_F(CudaComputeTest, GroupedGemmMatchesTheCpuForEveryTransposeAndDtype) {
  const std::vector<std::array<int64_t, 3>> shapes = {{37, 24, 40}, {1, 24, 40}, {16, 8, 72}};
  // Group g's operands lie in one buffer each, after the earlier groups' and one spare element.
  const auto part = [](TensorView whole, int64_t offset, std::vector<int64_t> shape) {
    whole.data =
        static_cast<char*>(whole.data) + offset * static_cast<int64_t>(DTypeSize(whole.dtype));
    whole.shape = std::move(shape);
    return whole;
  };
  int64_t a_size = 0, b_size = 0, c_size = 0;
  for (const auto& [m, n, k] : shapes) {
    a_size += m * k + 1;
    b_size += k * n + 1;
    c_size += m * n + 1;
  }
  for (bool bf16 : {false, true}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        Twin a = bf16 ? Bf16(Random(a_size, 31), {a_size}) : F32(Random(a_size, 31), {a_size});
        Twin b = bf16 ? Bf16(Random(b_size, 32), {b_size}) : F32(Random(b_size, 32), {b_size});
        Twin c = F32(Random(c_size, 33), {c_size});
        std::vector<GemmGroup> on_cpu, on_gpu;
        int64_t a_at = 0, b_at = 0, c_at = 0;
        for (const auto& [m, n, k] : shapes) {
          const std::vector<int64_t> a_shape = ta ? std::vector{k, m} : std::vector{m, k};
          const std::vector<int64_t> b_shape = tb ? std::vector{n, k} : std::vector{k, n};
          on_cpu.push_back({part(a.cpu(), a_at, a_shape), part(b.cpu(), b_at, b_shape),
                            part(c.cpu(), c_at, {m, n})});
          on_gpu.push_back({part(a.gpu(), a_at, a_shape), part(b.gpu(), b_at, b_shape),
                            part(c.gpu(), c_at, {m, n})});
          a_at += m * k + 1;
          b_at += k * n + 1;
          c_at += m * n + 1;
        }
        BOTH(cpu_.GroupedGemm(on_cpu, ta, tb, 0.5f, 2.0f),
             gpu_->GroupedGemm(on_gpu, ta, tb, 0.5f, 2.0f));
        ExpectNear(c.Gpu(), c.Cpu(), 1e-5, bf16 ? 1e-4 : 5e-5,
                   absl::StrCat("c bf16=", bf16, " ta=", ta, " tb=", tb));
      }
    }
  }
}

// Attention: online softmax against the CPU's exact one, sums over up to 40 keys in another
// order: 1e-5 relative plus 2e-6 absolute. Gradients: 1e-5 relative plus 1e-5 absolute times
// sqrt(head_dim / 16), as dp = dout . v sums head_dim terms and ds = p (dp - D) cancels.
void CompareAttention(Compute& cpu, Compute& gpu, const AttentionSpec& s, uint32_t seed) {
  const int64_t q_size = s.batch * s.seq_len * s.heads * s.head_dim;
  const int64_t kv_size = s.batch * s.kv_len * s.kv_heads * s.head_dim;
  const int64_t rows = s.batch * s.heads * s.seq_len;
  Twin q = F32(Random(q_size, seed), {q_size}), k = F32(Random(kv_size, seed + 1), {kv_size});
  Twin v = F32(Random(kv_size, seed + 2), {kv_size});
  Twin out = Zeros(DType::kF32, {q_size}), lse = Zeros(DType::kF32, {rows});
  ASSERT_TRUE(cpu.AttentionForward(s, q.cpu(), k.cpu(), v.cpu(), out.cpu(), lse.cpu()).ok());
  absl::Status forward = gpu.AttentionForward(s, q.gpu(), k.gpu(), v.gpu(), out.gpu(), lse.gpu());
  ASSERT_TRUE(forward.ok()) << forward;
  ExpectNear(out.Gpu(), out.Cpu(), 1e-5, 2e-6, "out");
  ExpectNear(lse.Gpu(), lse.Cpu(), 1e-5, 2e-6, "lse");
  // The backward from the CPU's forward on both sides, into gradients that already hold values.
  Twin out_ref = F32(out.Cpu(), {q_size}), lse_ref = F32(lse.Cpu(), {rows});
  Twin dout = F32(Random(q_size, seed + 3), {q_size});
  Twin dq = F32(Random(q_size, seed + 4), {q_size});
  Twin dk = F32(Random(kv_size, seed + 5), {kv_size}),
       dv = F32(Random(kv_size, seed + 6), {kv_size});
  ASSERT_TRUE(cpu.AttentionBackward(s, dout.cpu(), q.cpu(), k.cpu(), v.cpu(), out_ref.cpu(),
                                    lse_ref.cpu(), dq.cpu(), dk.cpu(), dv.cpu())
                  .ok());
  absl::Status backward =
      gpu.AttentionBackward(s, dout.gpu(), q.gpu(), k.gpu(), v.gpu(), out_ref.gpu(), lse_ref.gpu(),
                            dq.gpu(), dk.gpu(), dv.gpu());
  ASSERT_TRUE(backward.ok()) << backward;
  const double grad_abs = 1e-5 * std::max(1.0, std::sqrt(s.head_dim / 16.0));
  ExpectNear(dq.Gpu(), dq.Cpu(), 1e-5, grad_abs, "dq");
  ExpectNear(dk.Gpu(), dk.Cpu(), 1e-5, grad_abs, "dk");
  ExpectNear(dv.Gpu(), dv.Cpu(), 1e-5, grad_abs, "dv");
}

TEST_F(CudaComputeTest, AttentionCausalWithGqaMatchesTheCpu) {
  CompareAttention(
      cpu_, *gpu_,
      {.batch = 2, .seq_len = 37, .kv_len = 37, .heads = 4, .kv_heads = 2, .head_dim = 16}, 10);
}

TEST_F(CudaComputeTest, AttentionWithOffsetsMatchesTheCpu) {
  // A chunk of queries at 24.. against the keys 16..55 (context parallelism's view).
  CompareAttention(cpu_, *gpu_,
                   {.batch = 1,
                    .seq_len = 20,
                    .kv_len = 40,
                    .heads = 6,
                    .kv_heads = 3,
                    .head_dim = 40,
                    .q_offset = 24,
                    .kv_offset = 16},
                   20);
}

TEST_F(CudaComputeTest, AttentionAtTheLargestHeadDimMatchesTheCpu) {
  CompareAttention(
      cpu_, *gpu_,
      {.batch = 1, .seq_len = 9, .kv_len = 9, .heads = 2, .kv_heads = 1, .head_dim = 256}, 30);
}

// The tiled kernels at each head-dim bucket (64, 128, 256) over several tiles of queries and keys,
// at odd lengths, GQA ratios 1, 2 and 4, and chunks at offsets (context parallelism's).
TEST_F(CudaComputeTest, AttentionAcrossTilesAndHeadDimsMatchesTheCpu) {
  const AttentionSpec specs[] = {
      {.batch = 1, .seq_len = 130, .kv_len = 130, .heads = 2, .kv_heads = 2, .head_dim = 64},
      {.batch = 2, .seq_len = 75, .kv_len = 75, .heads = 4, .kv_heads = 2, .head_dim = 128},
      {.batch = 1, .seq_len = 97, .kv_len = 97, .heads = 8, .kv_heads = 2, .head_dim = 128},
      {.batch = 1, .seq_len = 33, .kv_len = 33, .heads = 4, .kv_heads = 1, .head_dim = 200},
      {.batch = 1,
       .seq_len = 50,
       .kv_len = 150,
       .heads = 4,
       .kv_heads = 1,
       .head_dim = 128,
       .q_offset = 100,
       .kv_offset = 0},
      {.batch = 1,
       .seq_len = 40,
       .kv_len = 24,
       .heads = 2,
       .kv_heads = 1,
       .head_dim = 64,
       .q_offset = 0,
       .kv_offset = 30},
  };
  uint32_t seed = 300;
  for (const AttentionSpec& spec : specs) {
    SCOPED_TRACE(absl::StrCat("t ", spec.seq_len, " kv ", spec.kv_len, " heads ", spec.heads, "/",
                              spec.kv_heads, " head_dim ", spec.head_dim));
    CompareAttention(cpu_, *gpu_, spec, seed);
    seed += 10;
  }
}

TEST_F(CudaComputeTest, AttentionChunkThatSeesNoKeyGetsZerosAndMinusInfinity) {
  // Queries at 0..7, keys at 8..15: no query sees a key; queries 8.. of a later chunk see some.
  const AttentionSpec none{.batch = 1,
                           .seq_len = 8,
                           .kv_len = 8,
                           .heads = 2,
                           .kv_heads = 1,
                           .head_dim = 8,
                           .q_offset = 0,
                           .kv_offset = 8};
  const int64_t size = 8 * 2 * 8;
  Twin q = F32(Random(size, 40), {size}), k = F32(Random(size / 2, 41), {size / 2});
  Twin v = F32(Random(size / 2, 42), {size / 2});
  Twin out = F32(Random(size, 43), {size}), lse = Zeros(DType::kF32, {16});
  ASSERT_TRUE(gpu_->AttentionForward(none, q.gpu(), k.gpu(), v.gpu(), out.gpu(), lse.gpu()).ok());
  for (float x : out.Gpu()) ASSERT_EQ(x, 0.0f);
  for (float x : lse.Gpu()) ASSERT_EQ(x, -std::numeric_limits<float>::infinity());
  CompareAttention(cpu_, *gpu_, none, 44);
  CompareAttention(cpu_, *gpu_,
                   {.batch = 1,
                    .seq_len = 8,
                    .kv_len = 8,
                    .heads = 2,
                    .kv_heads = 1,
                    .head_dim = 8,
                    .q_offset = 4,
                    .kv_offset = 8},
                   45);
}

TEST_F(CudaComputeTest, AttentionBackwardRepeatsBitForBit) {
  const AttentionSpec s{
      .batch = 1, .seq_len = 33, .kv_len = 33, .heads = 4, .kv_heads = 1, .head_dim = 32};
  const int64_t q_size = 33 * 4 * 32, kv_size = 33 * 32;
  Twin q = F32(Random(q_size, 50), {q_size}), k = F32(Random(kv_size, 51), {kv_size});
  Twin v = F32(Random(kv_size, 52), {kv_size}), dout = F32(Random(q_size, 53), {q_size});
  Twin out = Zeros(DType::kF32, {q_size}), lse = Zeros(DType::kF32, {4 * 33});
  ASSERT_TRUE(gpu_->AttentionForward(s, q.gpu(), k.gpu(), v.gpu(), out.gpu(), lse.gpu()).ok());
  std::vector<std::vector<float>> runs;
  for (int run = 0; run < 2; ++run) {
    Twin dq = Zeros(DType::kF32, {q_size}), dk = Zeros(DType::kF32, {kv_size});
    Twin dv = Zeros(DType::kF32, {kv_size});
    ASSERT_TRUE(gpu_->AttentionBackward(s, dout.gpu(), q.gpu(), k.gpu(), v.gpu(), out.gpu(),
                                        lse.gpu(), dq.gpu(), dk.gpu(), dv.gpu())
                    .ok());
    std::vector<float> all = dq.Gpu();
    for (const Twin* x : {&dk, &dv}) {
      std::vector<float> part = x->Gpu();
      all.insert(all.end(), part.begin(), part.end());
    }
    runs.push_back(std::move(all));
  }
  EXPECT_EQ(runs[0], runs[1]);
}

// cuDNN's fused attention in bf16 against f32 references. Its operands are q, k and v rounded to
// bf16 (a relative 2^-9) and its probabilities are bf16 before P v, so each result is held to
// bf16's accuracy: out's largest error at most 2e-2 of the largest |reference| (about five bf16
// steps of it) and its mean error at most 2e-3 of it; the gradients, which the tiled backward
// computes from cuDNN's out and log-sum-exps, 5e-2 and 5e-3. A wrong layout, mask or scale is off
// by the order of the values themselves. The log-sum-exps (f32 on both sides, from bf16 scores):
// within 5e-2 absolutely.
void ExpectBf16Close(const std::vector<float>& got, const std::vector<float>& want,
                     const std::string& what, double largest_error = 2e-2,
                     double mean_error = 2e-3) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double largest = 0, worst = 0, total = 0;
  size_t worst_at = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    largest = std::max(largest, std::fabs(static_cast<double>(want[i])));
    const double error = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(error <= worst)) worst = error, worst_at = i;  // NaN counts as the worst
    total += error;
  }
  const double mean = total / std::max<size_t>(want.size(), 1);
  EXPECT_LE(worst, largest_error * largest)
      << what << ": largest error " << worst << " at " << worst_at << " (got " << got[worst_at]
      << ", want " << want[worst_at] << "), largest |reference| " << largest;
  EXPECT_LE(mean, mean_error * largest)
      << what << ": mean error " << mean << ", largest |reference| " << largest;
}

void ExpectLseClose(const std::vector<float>& got, const std::vector<float>& want,
                    const std::string& what) {
  ExpectNear(got, want, 0.0, 5e-2, what);
}

// Runs `call` and the device's work, returning its status and what the plugin wrote to stderr
// (also shown, so the device's log of the proof holds what cuDNN said).
absl::Status RunLogged(Compute& gpu, const std::function<absl::Status()>& call, std::string& log) {
  ::testing::internal::CaptureStderr();
  absl::Status status = call();
  if (status.ok()) status = gpu.Synchronize();
  log = ::testing::internal::GetCapturedStderr();
  std::cout << log;
  return status;
}

// Expects the log to say which attention ran a direction: the first call of a shape says.
void ExpectRanBy(const std::string& log, const std::string& line) {
  EXPECT_NE(log.find(line), std::string::npos) << "expected \"" << line << "\"; the plugin said:\n"
                                               << log;
}

// Forward and backward of `s` three ways: the CPU (f32), titan's tiled kernels (f32) and
// job.attention = "cudnn" (bf16 where cuDNN takes the direction), each backward from its own
// forward's out and log-sum-exps, as a training step runs them. cuDNN's results against both
// f32 ones at bf16's accuracy; the log must say that cuDNN ran the forward, and the backward
// where `backward_by_cudnn`. A second backward into the same gradients doubles them (they
// accumulate, as the kernel table says).
// `operands`: the dtype of q, k, v, out and their gradients (bf16 ones cuDNN reads and writes as
// they are, the tiled kernels through f32 copies).
void CompareCudnnAttention(Compute& cpu, Compute& gpu, const AttentionSpec& s, uint32_t seed,
                           bool backward_by_cudnn = true, DType operands = DType::kF32) {
  SCOPED_TRACE(absl::StrCat("batch ", s.batch, " seq ", s.seq_len, " heads ", s.heads, "/",
                            s.kv_heads, " head_dim ", s.head_dim, ", ", DTypeName(operands),
                            " operands"));
  const int64_t q_size = s.batch * s.seq_len * s.heads * s.head_dim;
  const int64_t kv_size = s.batch * s.kv_len * s.kv_heads * s.head_dim;
  const int64_t rows = s.batch * s.heads * s.seq_len;
  const auto make = [&](int64_t size, uint32_t at) {
    return operands == DType::kBF16 ? Bf16(Random(size, at), {size})
                                    : F32(Random(size, at), {size});
  };
  Twin q = make(q_size, seed), k = make(kv_size, seed + 1);
  Twin v = make(kv_size, seed + 2), dout = make(q_size, seed + 3);
  struct Results {
    Twin out, lse, dq, dk, dv;
  };
  const auto zeros = [&] {
    return Results{Zeros(operands, {q_size}), Zeros(DType::kF32, {rows}), Zeros(operands, {q_size}),
                   Zeros(operands, {kv_size}), Zeros(operands, {kv_size})};
  };
  Results ref = zeros(), tiled = zeros(), cudnn = zeros();
  ASSERT_TRUE(
      cpu.AttentionForward(s, q.cpu(), k.cpu(), v.cpu(), ref.out.cpu(), ref.lse.cpu()).ok());
  ASSERT_TRUE(cpu.AttentionBackward(s, dout.cpu(), q.cpu(), k.cpu(), v.cpu(), ref.out.cpu(),
                                    ref.lse.cpu(), ref.dq.cpu(), ref.dk.cpu(), ref.dv.cpu())
                  .ok());
  const auto forward = [&](Results& r) {
    return gpu.AttentionForward(s, q.gpu(), k.gpu(), v.gpu(), r.out.gpu(), r.lse.gpu());
  };
  const auto backward = [&](Results& r) {
    return gpu.AttentionBackward(s, dout.gpu(), q.gpu(), k.gpu(), v.gpu(), r.out.gpu(), r.lse.gpu(),
                                 r.dq.gpu(), r.dk.gpu(), r.dv.gpu());
  };
  SetAttention("tiled");
  ASSERT_TRUE(forward(tiled).ok());
  ASSERT_TRUE(backward(tiled).ok());
  SetAttention("cudnn");
  std::string log;
  absl::Status status = RunLogged(
      gpu, [&] { return forward(cudnn); }, log);
  ASSERT_TRUE(status.ok()) << status;
  ExpectRanBy(log, "cuda: attention forward by cuDNN ");
  status = RunLogged(
      gpu, [&] { return backward(cudnn); }, log);
  ASSERT_TRUE(status.ok()) << status;
  ExpectRanBy(log, backward_by_cudnn ? "cuda: attention backward by cuDNN "
                                     : "cuda: attention backward by titan's tiled f32 kernels");
  for (Results* want : {&ref, &tiled}) {
    const std::string against = want == &ref ? " against the cpu" : " against the tiled kernel";
    const auto reference = [&](const Twin& x) { return want == &ref ? x.Cpu() : x.Gpu(); };
    ExpectBf16Close(cudnn.out.Gpu(), reference(want->out), "out" + against);
    ExpectLseClose(cudnn.lse.Gpu(), reference(want->lse), "lse" + against);
    ExpectBf16Close(cudnn.dq.Gpu(), reference(want->dq), "dq" + against, 5e-2, 5e-3);
    ExpectBf16Close(cudnn.dk.Gpu(), reference(want->dk), "dk" + against, 5e-2, 5e-3);
    ExpectBf16Close(cudnn.dv.Gpu(), reference(want->dv), "dv" + against, 5e-2, 5e-3);
  }
  const std::vector<float> once = cudnn.dk.Gpu();
  ASSERT_TRUE(backward(cudnn).ok());
  std::vector<float> twice = once;
  for (float& x : twice) x *= 2;
  ExpectBf16Close(cudnn.dk.Gpu(), twice, "dk after a second backward", 1e-2, 1e-3);
}

// GQA (4 heads on 2) and plain multi-head, head_dim 64 and 128, seq 128 and 512, batch 2.
TEST_F(CudaComputeTest, CudnnAttentionMatchesTheCpuAndTheTiledKernelInBf16) {
  const AttentionSpec specs[] = {
      {.batch = 2, .seq_len = 128, .kv_len = 128, .heads = 4, .kv_heads = 2, .head_dim = 64},
      {.batch = 2, .seq_len = 128, .kv_len = 128, .heads = 4, .kv_heads = 2, .head_dim = 128},
      {.batch = 2, .seq_len = 512, .kv_len = 512, .heads = 4, .kv_heads = 2, .head_dim = 64},
      {.batch = 2, .seq_len = 512, .kv_len = 512, .heads = 4, .kv_heads = 4, .head_dim = 128},
  };
  uint32_t seed = 700;
  for (const AttentionSpec& spec : specs) {
    CompareCudnnAttention(cpu_, *gpu_, spec, seed);
    seed += 10;
  }
}

// bf16 activations: cuDNN takes q, k, v and out and writes out as they are, with no cast; the
// tiled kernels widen and round them; both against the CPU's bf16 run.
TEST_F(CudaComputeTest, AttentionWithBf16ActivationsMatchesTheCpu) {
  const AttentionSpec spec{.batch = 2,
                           .seq_len = 128,
                           .kv_len = 128,
                           .heads = 4,
                           .kv_heads = 2,
                           .head_dim = 64,
                           .matmul_dtype = DType::kBF16};
  CompareCudnnAttention(cpu_, *gpu_, spec, 760, true, DType::kBF16);
}

// The cross-entropy with bf16 logits and a bf16 gradient against the CPU's (the same rows).
TEST_F(CudaComputeTest, CrossEntropyWithBf16LogitsMatchesTheCpu) {
  const int64_t n = 37, v = 1000;
  Twin logits = Bf16(Random(n * v, 790, 3.0f), {n, v});
  std::vector<int32_t> target_values(n);
  for (int64_t i = 0; i < n; ++i) target_values[i] = static_cast<int32_t>((i * 97) % 1100) - 50;
  target_values[3] = -100;
  Twin targets = I32(target_values);
  Twin max = Zeros(DType::kF32, {n}), sum = Zeros(DType::kF32, {n}),
       target = Zeros(DType::kF32, {n});
  Twin loss = Zeros(DType::kF32, {1}), dlogits = Zeros(DType::kBF16, {n, v});
  BOTH(cpu_.CrossEntropyRowMax(logits.cpu(), max.cpu()),
       gpu_->CrossEntropyRowMax(logits.gpu(), max.gpu()));
  BOTH(cpu_.CrossEntropySumExp(logits.cpu(), max.cpu(), sum.cpu()),
       gpu_->CrossEntropySumExp(logits.gpu(), max.gpu(), sum.gpu()));
  BOTH(cpu_.CrossEntropyTargetLogit(logits.cpu(), targets.cpu(), 0, target.cpu()),
       gpu_->CrossEntropyTargetLogit(logits.gpu(), targets.gpu(), 0, target.gpu()));
  BOTH(cpu_.CrossEntropyFinish(max.cpu(), target.cpu(), targets.cpu(), sum.cpu(), loss.cpu()),
       gpu_->CrossEntropyFinish(max.gpu(), target.gpu(), targets.gpu(), sum.gpu(), loss.gpu()));
  EXPECT_EQ(max.Gpu(), max.Cpu());
  EXPECT_EQ(target.Gpu(), target.Cpu());
  ExpectNear(sum.Gpu(), sum.Cpu(), 1e-5, 1e-6, "log-sum-exp");
  ExpectNear(loss.Gpu(), loss.Cpu(), 1e-5, 1e-6, "loss");
  BOTH(cpu_.CrossEntropyBackward(logits.cpu(), sum.cpu(), targets.cpu(), 0, 1.0f, dlogits.cpu()),
       gpu_->CrossEntropyBackward(logits.gpu(), sum.gpu(), targets.gpu(), 0, 1.0f, dlogits.gpu()));
  ExpectNear(dlogits.Gpu(), dlogits.Cpu(), 1.0 / 128, 1e-7, "dlogits (bf16)");
}

// Shapes cuDNN is not given run in the tiled kernels, and the log says so once, with the reason:
// head_dim 20 (not a multiple of 8) both ways, at the tiled kernels' f32 accuracy; seq_len 64 the
// backward only (cuDNN's forward, the tiled backward from its out and log-sum-exps); a
// context-parallel chunk (queries at an offset against other keys).
TEST_F(CudaComputeTest, CudnnAttentionFallsBackToTheTiledKernelAndSaysWhy) {
  SetAttention("cudnn");
  std::string log;
  absl::Status status = RunLogged(
      *gpu_,
      [&] {
        CompareAttention(
            cpu_, *gpu_,
            {.batch = 2, .seq_len = 48, .kv_len = 48, .heads = 4, .kv_heads = 2, .head_dim = 20},
            760);
        return absl::OkStatus();
      },
      log);
  ASSERT_TRUE(status.ok()) << status;
  ExpectRanBy(log,
              "cuda: attention forward by titan's tiled f32 kernels: head_dim 20 (cuDNN's "
              "takes multiples of 8 up to 128)");
  ExpectRanBy(log, "cuda: attention backward by titan's tiled f32 kernels: head_dim 20");
  CompareCudnnAttention(
      cpu_, *gpu_,
      {.batch = 2, .seq_len = 64, .kv_len = 64, .heads = 4, .kv_heads = 2, .head_dim = 64}, 765,
      /*backward_by_cudnn=*/false);
  SetAttention("cudnn");
  CompareAttention(cpu_, *gpu_,
                   {.batch = 1,
                    .seq_len = 64,
                    .kv_len = 128,
                    .heads = 4,
                    .kv_heads = 2,
                    .head_dim = 64,
                    .q_offset = 64,
                    .kv_offset = 0},
                   770);
}

TEST_F(CudaComputeTest, AttentionMergeMatchesTheCpu) {
  const AttentionSpec s{
      .batch = 2, .seq_len = 5, .kv_len = 5, .heads = 3, .kv_heads = 3, .head_dim = 8};
  const int64_t rows = 2 * 5 * 3, size = rows * 8;
  std::vector<float> lse_values = Random(rows, 60), part_lse_values = Random(rows, 61);
  lse_values[0] = part_lse_values[1] = -std::numeric_limits<float>::infinity();
  lse_values[2] = part_lse_values[2] = -std::numeric_limits<float>::infinity();
  Twin out = F32(Random(size, 62), {size}), part_out = F32(Random(size, 63), {size});
  Twin lse = F32(lse_values, {rows}), part_lse = F32(part_lse_values, {rows});
  BOTH(cpu_.AttentionMerge(s, part_out.cpu(), part_lse.cpu(), out.cpu(), lse.cpu()),
       gpu_->AttentionMerge(s, part_out.gpu(), part_lse.gpu(), out.gpu(), lse.gpu()));
  ExpectNear(out.Gpu(), out.Cpu(), 1e-5, 1e-6, "out");
  ExpectNear(lse.Gpu(), lse.Cpu(), 1e-5, 1e-6, "lse");
}

// Row sums over 300 columns in f64 on both sides: 1e-5 relative and 1e-6 absolute.
TEST_F(CudaComputeTest, RmsNormForwardAndBackwardMatchTheCpu) {
  const int64_t n = 70, c = 300;
  Twin inp = F32(Random(n * c, 70), {n, c}), weight = F32(Random(c, 71), {c});
  Twin out = Zeros(DType::kF32, {n * c}), rstd = Zeros(DType::kF32, {n});
  BOTH(cpu_.RmsNormForward(inp.cpu(), weight.cpu(), 1e-5, out.cpu(), rstd.cpu()),
       gpu_->RmsNormForward(inp.gpu(), weight.gpu(), 1e-5, out.gpu(), rstd.gpu()));
  ExpectNear(out.Gpu(), out.Cpu(), 1e-5, 1e-6, "out");
  ExpectNear(rstd.Gpu(), rstd.Cpu(), 1e-5, 0, "rstd");
  Twin dout = F32(Random(n * c, 72), {n * c}), dinp = F32(Random(n * c, 73), {n * c});
  Twin dweight = F32(Random(c, 74), {c});
  BOTH(cpu_.RmsNormBackward(dout.cpu(), inp.cpu(), weight.cpu(), rstd.cpu(), dinp.cpu(),
                            dweight.cpu()),
       gpu_->RmsNormBackward(dout.gpu(), inp.gpu(), weight.gpu(), rstd.gpu(), dinp.gpu(),
                             dweight.gpu()));
  ExpectNear(dinp.Gpu(), dinp.Cpu(), 1e-5, 1e-6, "dinp");
  ExpectNear(dweight.Gpu(), dweight.Cpu(), 1e-5, 1e-5, "dweight");
}

// bf16 activations (each read into f32, written rounded once): a result may round to the next
// bf16 value where the GPU's f32 arithmetic differs from the CPU's in its last bits, so bf16
// results are compared within one bf16 step (1/128 of the value) and f32 ones as in f32.
TEST_F(CudaComputeTest, LayerKernelsWithBf16ActivationsMatchTheCpu) {
  const int64_t n = 70, c = 300;
  constexpr double kBf16Step = 1.0 / 128;
  Twin inp = Bf16(Random(n * c, 170), {n, c}), weight = F32(Random(c, 171), {c});
  Twin out = Zeros(DType::kBF16, {n * c}), rstd = Zeros(DType::kF32, {n});
  BOTH(cpu_.RmsNormForward(inp.cpu(), weight.cpu(), 1e-5, out.cpu(), rstd.cpu()),
       gpu_->RmsNormForward(inp.gpu(), weight.gpu(), 1e-5, out.gpu(), rstd.gpu()));
  ExpectNear(out.Gpu(), out.Cpu(), kBf16Step, 1e-6, "RmsNormForward out");
  Twin dout = Bf16(Random(n * c, 172), {n * c}), dinp = F32(Random(n * c, 173), {n * c});
  Twin dweight = F32(Random(c, 174), {c});
  BOTH(cpu_.RmsNormBackward(dout.cpu(), inp.cpu(), weight.cpu(), rstd.cpu(), dinp.cpu(),
                            dweight.cpu()),
       gpu_->RmsNormBackward(dout.gpu(), inp.gpu(), weight.gpu(), rstd.gpu(), dinp.gpu(),
                             dweight.gpu()));
  ExpectNear(dinp.Gpu(), dinp.Cpu(), 1e-5, 1e-6, "RmsNormBackward dinp (f32 from bf16)");
  ExpectNear(dweight.Gpu(), dweight.Cpu(), 1e-5, 1e-5, "RmsNormBackward dweight");

  Twin a = Bf16(Random(n * c, 175, 3.0f), {n * c}), b = Bf16(Random(n * c, 176), {n * c});
  Twin h = Zeros(DType::kBF16, {n * c});
  BOTH(cpu_.SwiGluForward(a.cpu(), b.cpu(), h.cpu()),
       gpu_->SwiGluForward(a.gpu(), b.gpu(), h.gpu()));
  ExpectNear(h.Gpu(), h.Cpu(), kBf16Step, 1e-6, "SwiGluForward out");
  Twin da = Bf16(Random(n * c, 177), {n * c}), db = Bf16(Random(n * c, 178), {n * c});
  BOTH(cpu_.SwiGluBackward(h.cpu(), a.cpu(), b.cpu(), da.cpu(), db.cpu()),
       gpu_->SwiGluBackward(h.gpu(), a.gpu(), b.gpu(), da.gpu(), db.gpu()));
  ExpectNear(da.Gpu(), da.Cpu(), kBf16Step, 1e-6, "SwiGluBackward da");
  ExpectNear(db.Gpu(), db.Cpu(), kBf16Step, 1e-6, "SwiGluBackward db");

  const int64_t t = 10, heads = 3, hd = 10;
  Twin cos = F32(Random(t * hd / 2, 179), {t, hd / 2}),
       sin = F32(Random(t * hd / 2, 180), {t, hd / 2});
  Twin x = Bf16(Random(2 * t * heads * hd, 181), {2, t, heads, hd});
  BOTH(cpu_.RopeForward(cos.cpu(), sin.cpu(), x.cpu()),
       gpu_->RopeForward(cos.gpu(), sin.gpu(), x.gpu()));
  ExpectNear(x.Gpu(), x.Cpu(), kBf16Step, 1e-6, "RopeForward x");

  Twin tokens = I32({5, 7, 14, 7, 3, 15, 9, 5}), table = F32(Random(10 * c, 182), {10, c});
  Twin rows = Zeros(DType::kBF16, {8, c}), drows = Bf16(Random(8 * c, 183), {8, c});
  Twin dtable = F32(Random(10 * c, 184), {10, c});
  BOTH(cpu_.EmbeddingForward(tokens.cpu(), table.cpu(), 5, rows.cpu()),
       gpu_->EmbeddingForward(tokens.gpu(), table.gpu(), 5, rows.gpu()));
  EXPECT_EQ(rows.GpuBytes(), rows.CpuBytes()) << "EmbeddingForward rows: one rounding of each";
  BOTH(cpu_.EmbeddingBackward(tokens.cpu(), drows.cpu(), 5, dtable.cpu()),
       gpu_->EmbeddingBackward(tokens.gpu(), drows.gpu(), 5, dtable.gpu()));
  EXPECT_EQ(dtable.GpuBytes(), dtable.CpuBytes()) << "EmbeddingBackward: token order on both";

  Twin sum = Bf16(Random(n * c, 185), {n * c});
  BOTH(cpu_.Accumulate(inp.cpu(), sum.cpu()), gpu_->Accumulate(inp.gpu(), sum.gpu()));
  EXPECT_EQ(sum.GpuBytes(), sum.CpuBytes()) << "Accumulate: one f32 add, rounded once";
  BOTH(cpu_.Fill(sum.cpu(), 1.3f), gpu_->Fill(sum.gpu(), 1.3f));
  EXPECT_EQ(sum.GpuBytes(), sum.CpuBytes()) << "Fill";

  const int64_t m = 64, k = 80, w = 48;
  Twin ga = Bf16(Random(m * k, 186), {m, k}), gb = Bf16(Random(k * w, 187), {k, w});
  for (float beta : {0.0f, 1.0f}) {
    Twin gc = Bf16(Random(m * w, 188), {m, w});
    BOTH(cpu_.Gemm(ga.cpu(), false, gb.cpu(), false, 1.0f, beta, gc.cpu()),
         gpu_->Gemm(ga.gpu(), false, gb.gpu(), false, 1.0f, beta, gc.gpu()));
    ExpectNear(gc.Gpu(), gc.Cpu(), kBf16Step, 1e-4, absl::StrCat("Gemm into bf16, beta ", beta));
  }
}

TEST_F(CudaComputeTest, RopeTableForwardAndBackwardMatchTheCpu) {
  const int64_t b = 2, t = 12, heads = 3, hd = 16;
  const RopeSpec spec{.head_dim = hd, .theta = 500000.0, .scaled = true};
  Twin cos = Zeros(DType::kF32, {t, hd / 2}), sin = Zeros(DType::kF32, {t, hd / 2});
  BOTH(cpu_.RopeTable(spec, 9000, cos.cpu(), sin.cpu()),
       gpu_->RopeTable(spec, 9000, cos.gpu(), sin.gpu()));
  ExpectNear(cos.Gpu(), cos.Cpu(), 1e-6, 1e-6, "cos");
  ExpectNear(sin.Gpu(), sin.Cpu(), 1e-6, 1e-6, "sin");
  Twin cos_ref = F32(cos.Cpu(), {t, hd / 2}), sin_ref = F32(sin.Cpu(), {t, hd / 2});
  Twin x = F32(Random(b * t * heads * hd, 80), {b, t, heads, hd});
  BOTH(cpu_.RopeForward(cos_ref.cpu(), sin_ref.cpu(), x.cpu()),
       gpu_->RopeForward(cos_ref.gpu(), sin_ref.gpu(), x.gpu()));
  ExpectNear(x.Gpu(), x.Cpu(), 1e-5, 1e-6, "x");
  Twin dx = F32(Random(b * t * heads * hd, 81), {b, t, heads, hd});
  BOTH(cpu_.RopeBackward(cos_ref.cpu(), sin_ref.cpu(), dx.cpu()),
       gpu_->RopeBackward(cos_ref.gpu(), sin_ref.gpu(), dx.gpu()));
  ExpectNear(dx.Gpu(), dx.Cpu(), 1e-5, 1e-6, "dx");
}

TEST_F(CudaComputeTest, SwiGluForwardAndBackwardMatchTheCpu) {
  const int64_t n = 5000;
  Twin a = F32(Random(n, 90, 3.0f), {n}), b = F32(Random(n, 91), {n});
  Twin out = Zeros(DType::kF32, {n});
  BOTH(cpu_.SwiGluForward(a.cpu(), b.cpu(), out.cpu()),
       gpu_->SwiGluForward(a.gpu(), b.gpu(), out.gpu()));
  ExpectNear(out.Gpu(), out.Cpu(), 1e-5, 1e-7, "out");
  Twin dout = F32(Random(n, 92), {n}), da = F32(Random(n, 93), {n}), db = F32(Random(n, 94), {n});
  BOTH(cpu_.SwiGluBackward(dout.cpu(), a.cpu(), b.cpu(), da.cpu(), db.cpu()),
       gpu_->SwiGluBackward(dout.gpu(), a.gpu(), b.gpu(), da.gpu(), db.gpu()));
  ExpectNear(da.Gpu(), da.Cpu(), 1e-5, 1e-6, "da");
  ExpectNear(db.Gpu(), db.Cpu(), 1e-5, 1e-6, "db");
}

// The backward adds each token's row in token order, as the CPU does: bit for bit.
TEST_F(CudaComputeTest, EmbeddingForwardAndBackwardMatchTheCpuExactly) {
  const int64_t rows = 10, c = 33, first_row = 5;
  const std::vector<int32_t> token_values = {5, 7, 14, 7, 3, 15, 9, 5, 5, 20, 14};
  const int64_t n = static_cast<int64_t>(token_values.size());
  Twin tokens = I32(token_values), table = F32(Random(rows * c, 100), {rows, c});
  Twin out = F32(Random(n * c, 101), {n * c});
  BOTH(cpu_.EmbeddingForward(tokens.cpu(), table.cpu(), first_row, out.cpu()),
       gpu_->EmbeddingForward(tokens.gpu(), table.gpu(), first_row, out.gpu()));
  EXPECT_EQ(out.Gpu(), out.Cpu());
  Twin dout = F32(Random(n * c, 102), {n * c}), dtable = F32(Random(rows * c, 103), {rows, c});
  BOTH(cpu_.EmbeddingBackward(tokens.cpu(), dout.cpu(), first_row, dtable.cpu()),
       gpu_->EmbeddingBackward(tokens.gpu(), dout.gpu(), first_row, dtable.gpu()));
  EXPECT_EQ(dtable.Gpu(), dtable.Cpu());
}

// Many tokens of few rows over several chunks and column blocks, as the device's bucket count
// splits them: still the CPU's sums, bit for bit.
TEST_F(CudaComputeTest, EmbeddingBackwardOfManyRepeatsMatchesTheCpuExactly) {
  const int64_t n = 3000, c = 700, rows = 64, first_row = 1000;
  std::mt19937 rng(104);
  std::vector<int32_t> token_values(n);
  for (int32_t& t : token_values) t = static_cast<int32_t>(first_row - 4 + rng() % (rows + 8));
  Twin tokens = I32(token_values), dout = F32(Random(n * c, 105), {n * c});
  Twin dtable = F32(Random(rows * c, 106), {rows, c});
  BOTH(cpu_.EmbeddingBackward(tokens.cpu(), dout.cpu(), first_row, dtable.cpu()),
       gpu_->EmbeddingBackward(tokens.gpu(), dout.gpu(), first_row, dtable.gpu()));
  EXPECT_EQ(dtable.Gpu(), dtable.Cpu());
}

TEST_F(CudaComputeTest, CrossEntropyPiecesMatchTheCpu) {
  const int64_t n = 9, v = 1000, first_column = 500;
  const std::vector<int32_t> target_values = {500, 1499, -100, 3, 777, 1000, -100, 501, 1200};
  Twin logits = F32(Random(n * v, 110, 4.0f), {n, v}), targets = I32(target_values);
  Twin max = Zeros(DType::kF32, {n}), sum = Zeros(DType::kF32, {n});
  Twin target = Zeros(DType::kF32, {n}), loss = Zeros(DType::kF32, {1});
  BOTH(cpu_.CrossEntropyRowMax(logits.cpu(), max.cpu()),
       gpu_->CrossEntropyRowMax(logits.gpu(), max.gpu()));
  EXPECT_EQ(max.Gpu(), max.Cpu());
  BOTH(cpu_.CrossEntropySumExp(logits.cpu(), max.cpu(), sum.cpu()),
       gpu_->CrossEntropySumExp(logits.gpu(), max.gpu(), sum.gpu()));
  ExpectNear(sum.Gpu(), sum.Cpu(), 1e-5, 0, "sum");
  BOTH(cpu_.CrossEntropyTargetLogit(logits.cpu(), targets.cpu(), first_column, target.cpu()),
       gpu_->CrossEntropyTargetLogit(logits.gpu(), targets.gpu(), first_column, target.gpu()));
  EXPECT_EQ(target.Gpu(), target.Cpu());
  BOTH(cpu_.CrossEntropyFinish(max.cpu(), target.cpu(), targets.cpu(), sum.cpu(), loss.cpu()),
       gpu_->CrossEntropyFinish(max.gpu(), target.gpu(), targets.gpu(), sum.gpu(), loss.gpu()));
  ExpectNear(sum.Gpu(), sum.Cpu(), 1e-5, 0, "lse");
  ExpectNear(loss.Gpu(), loss.Cpu(), 1e-5, 0, "loss");
  Twin lse = F32(sum.Cpu(), {n}), dlogits = Zeros(DType::kF32, {n, v});
  BOTH(cpu_.CrossEntropyBackward(logits.cpu(), lse.cpu(), targets.cpu(), first_column, 0.5f,
                                 dlogits.cpu()),
       gpu_->CrossEntropyBackward(logits.gpu(), lse.gpu(), targets.gpu(), first_column, 0.5f,
                                  dlogits.gpu()));
  ExpectNear(dlogits.Gpu(), dlogits.Cpu(), 1e-5, 1e-9, "dlogits");
  // In place, as the model calls it.
  BOTH(cpu_.CrossEntropyBackward(logits.cpu(), lse.cpu(), targets.cpu(), first_column, 0.5f,
                                 logits.cpu()),
       gpu_->CrossEntropyBackward(logits.gpu(), lse.gpu(), targets.gpu(), first_column, 0.5f,
                                  logits.gpu()));
  ExpectNear(logits.Gpu(), logits.Cpu(), 1e-5, 1e-9, "dlogits in place");
}

TEST_F(CudaComputeTest, AdamAndAdamWStepsMatchTheCpu) {
  const int64_t n = 3000;
  for (bool decoupled : {true, false}) {
    Twin params = F32(Random(n, 120), {n}), grads = F32(Random(n, 121), {n});
    Twin m = Zeros(DType::kF32, {n}), v = Zeros(DType::kF32, {n});
    for (int64_t step = 1; step <= 3; ++step) {
      const AdamUpdate u{
          .lr = 1e-3, .weight_decay = 0.1, .decoupled_weight_decay = decoupled, .step = step};
      BOTH(cpu_.AdamStep(u, params.cpu(), grads.cpu(), m.cpu(), v.cpu()),
           gpu_->AdamStep(u, params.gpu(), grads.gpu(), m.gpu(), v.gpu()));
    }
    ExpectNear(params.Gpu(), params.Cpu(), 1e-5, 1e-7, "params");
    ExpectNear(m.Gpu(), m.Cpu(), 1e-5, 1e-9, "exp_avg");
    ExpectNear(v.Gpu(), v.Cpu(), 1e-5, 1e-12, "exp_avg_sq");
  }
}

TEST_F(CudaComputeTest, SgdStepsMatchTheCpu) {
  const int64_t n = 3000;
  for (bool nesterov : {false, true}) {
    Twin params = F32(Random(n, 130), {n}), grads = F32(Random(n, 131), {n});
    Twin buffer = F32(Random(n, 132), {n});
    for (int64_t step = 1; step <= 3; ++step) {
      const SgdUpdate u{.lr = 0.1,
                        .momentum = 0.9,
                        .dampening = nesterov ? 0.0 : 0.1,
                        .weight_decay = 0.01,
                        .nesterov = nesterov,
                        .step = step};
      BOTH(cpu_.SgdStep(u, params.cpu(), grads.cpu(), buffer.cpu()),
           gpu_->SgdStep(u, params.gpu(), grads.gpu(), buffer.gpu()));
    }
    ExpectNear(params.Gpu(), params.Cpu(), 1e-5, 1e-6, "params");
    ExpectNear(buffer.Gpu(), buffer.Cpu(), 1e-5, 1e-6, "momentum_buffer");
  }
}

TEST_F(CudaComputeTest, SumOfSquaresMatchesTheCpuInF64) {
  Twin x = F32(Random(100000, 140), {100000}), y = F32(Random(77, 141), {77});
  Twin cpu_out = Zeros(DType::kF32, {2}), gpu_out = Zeros(DType::kF32, {2});
  const double weights[] = {1.0, 0.5};
  const TensorView cpu_tensors[] = {x.cpu(), y.cpu()};
  const TensorView gpu_tensors[] = {x.gpu(), y.gpu()};
  BOTH(cpu_.SumOfSquares(cpu_tensors, weights, cpu_out.cpu()),
       gpu_->SumOfSquares(gpu_tensors, weights, gpu_out.gpu()));
  const std::vector<float> gpu = gpu_out.Gpu(), cpu = cpu_out.Cpu();
  EXPECT_NEAR(static_cast<double>(gpu[0]) + gpu[1], static_cast<double>(cpu[0]) + cpu[1],
              1e-9 * cpu[0]);
  // A non-finite value anywhere makes the sum non-finite.
  std::vector<float> bad = Random(1000, 142);
  bad[500] = std::numeric_limits<float>::infinity();
  Twin z = F32(bad, {1000});
  const TensorView with_inf[] = {x.gpu(), z.gpu()};
  ASSERT_TRUE(gpu_->SumOfSquares(with_inf, weights, gpu_out.gpu()).ok());
  EXPECT_FALSE(std::isfinite(gpu_out.Gpu()[0]));
}

TEST_F(CudaComputeTest, CastsRoundExactlyAsTheCpu) {
  std::vector<float> values = Random(4096, 150, 1000.0f);
  values[0] = 1e-40f;    // subnormal
  values[1] = 70000.0f;  // past f16's largest
  values[2] = std::numeric_limits<float>::quiet_NaN();
  values[3] = -0.0f;
  values[4] = 1.0f + 1.0f / 256;  // a bf16 tie
  Twin src = F32(values, {4096});
  for (DType to : {DType::kBF16, DType::kF16}) {
    Twin narrow = Zeros(to, {4096}), back = Zeros(DType::kF32, {4096});
    BOTH(cpu_.Cast(src.cpu(), narrow.cpu()), gpu_->Cast(src.gpu(), narrow.gpu()));
    EXPECT_EQ(narrow.GpuBytes(), narrow.CpuBytes()) << DTypeName(to);
    BOTH(cpu_.Cast(narrow.cpu(), back.cpu()), gpu_->Cast(narrow.gpu(), back.gpu()));
    EXPECT_EQ(back.GpuBytes(), back.CpuBytes()) << DTypeName(to);
  }
}

// The initial weights drawn on the GPU are the CPU's: the same formula (titan/truncated_normal.h)
// in the device's double math, which may round an element's last f32 bit the other way. A
// narrow cut makes many elements redraw.
TEST_F(CudaComputeTest, FillTruncatedNormalDrawsTheCpusValues) {
  const int64_t n = 1 << 20;
  struct Cut {
    double std, low, high;
  };
  for (const Cut& cut : {Cut{0.02, -2.0, 2.0}, Cut{1.0, -0.3, 0.3}, Cut{0.0625, -0.1875, 0.1875}}) {
    Twin x = Zeros(DType::kF32, {n});
    BOTH(cpu_.FillTruncatedNormal(x.cpu(), 0x1234abcdULL, cut.std, cut.low, cut.high),
         gpu_->FillTruncatedNormal(x.gpu(), 0x1234abcdULL, cut.std, cut.low, cut.high));
    const std::vector<float> cpu = x.Cpu(), gpu = x.Gpu();
    int64_t differing = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (cpu[i] == gpu[i]) continue;
      ++differing;
      ASSERT_EQ(std::nextafter(cpu[i], gpu[i]), gpu[i]) << "element " << i << " of std " << cut.std;
    }
    EXPECT_LE(differing, 64) << "of " << n << " elements, std " << cut.std;
  }
}

TEST_F(CudaComputeTest, FillScaleAccumulateAndCopyMatchTheCpu) {
  const int64_t n = 1000;
  Twin x = F32(Random(n, 160), {n}), y = F32(Random(n, 161), {n}), z = Zeros(DType::kF32, {n});
  BOTH(cpu_.Scale(x.cpu(), 0.25f), gpu_->Scale(x.gpu(), 0.25f));
  BOTH(cpu_.Accumulate(x.cpu(), y.cpu()), gpu_->Accumulate(x.gpu(), y.gpu()));
  EXPECT_EQ(y.Gpu(), y.Cpu());
  BOTH(cpu_.Copy(y.cpu(), z.cpu()), gpu_->Copy(y.gpu(), z.gpu()));
  EXPECT_EQ(z.Gpu(), y.Cpu());
  // Overlapping views copy as memmove does.
  auto slice = [n](TensorView x, int64_t offset) {
    x.data = static_cast<float*>(x.data) + offset;
    x.shape = {n - 10};
    return x;
  };
  BOTH(cpu_.Copy(slice(z.cpu(), 0), slice(z.cpu(), 10)),
       gpu_->Copy(slice(z.gpu(), 0), slice(z.gpu(), 10)));
  EXPECT_EQ(z.Gpu(), z.Cpu());
  BOTH(cpu_.Fill(z.cpu(), 3.5f), gpu_->Fill(z.gpu(), 3.5f));
  EXPECT_EQ(z.Gpu(), std::vector<float>(n, 3.5f));
  std::vector<float> host(n);
  ASSERT_TRUE(gpu_->CopyToHost(y.gpu(), host.data()).ok());
  EXPECT_EQ(host, y.Cpu());
  host.assign(n, -1.0f);
  ASSERT_TRUE(gpu_->CopyFromHost(host.data(), z.gpu()).ok());
  EXPECT_EQ(z.Gpu(), host);
}

TEST_F(CudaComputeTest, EventsOrderWorkAcrossStreams) {
  const int64_t n = 1 << 20;
  Twin x = Zeros(DType::kF32, {n});
  ASSERT_TRUE(gpu_->Fill(x.gpu(), 2.0f).ok());
  absl::StatusOr<EventHandle> filled = gpu_->RecordEvent(gpu_->current_stream());
  ASSERT_TRUE(filled.ok()) << filled.status();
  ASSERT_TRUE(gpu_->StreamWaitEvent(gpu_->current_stream(), *filled).ok());
  ASSERT_TRUE(gpu_->SynchronizeEvent(*filled).ok());
  std::vector<float> host(n);
  ASSERT_TRUE(CudaDevicePlugin().CopyToHost(host.data(), x.gpu().data, n * sizeof(float)).ok());
  EXPECT_EQ(host, std::vector<float>(n, 2.0f));
}

TEST_F(CudaComputeTest, Float8QuantizeWritesTheCpusBytes) {
  const int64_t rows = 24, columns = 40;
  std::vector<float> values = Random(rows * columns, 170, 30.0f);
  values[7] = 0.0f;
  for (bool bf16 : {false, true}) {
    Twin x = bf16 ? Bf16(values, {rows, columns}) : F32(values, {rows, columns});
    for (DType format : {DType::kF8E4M3, DType::kF8E5M2}) {
      for (Float8Granularity granularity : {Float8Granularity::kTensor, Float8Granularity::kRow}) {
        for (bool transpose : {false, true}) {
          for (bool power_of_two : {false, true}) {
            const Float8Scaling scaling{granularity, power_of_two, transpose, {}};
            const int64_t out_rows = transpose ? columns : rows;
            Twin out = Zeros(format, transpose ? std::vector<int64_t>{columns, rows}
                                               : std::vector<int64_t>{rows, columns});
            Twin scales =
                Zeros(DType::kF32, {granularity == Float8Granularity::kRow ? out_rows : 1});
            BOTH(cpu_.Float8Quantize(x.cpu(), scaling, out.cpu(), scales.cpu()),
                 gpu_->Float8Quantize(x.gpu(), scaling, out.gpu(), scales.gpu()));
            const std::string what =
                absl::StrCat(bf16 ? "bf16 " : "f32 ", DTypeName(format),
                             granularity == Float8Granularity::kRow ? " row" : " tensor",
                             transpose ? " transposed" : "", power_of_two ? " pow2" : "");
            EXPECT_EQ(out.GpuBytes(), out.CpuBytes()) << what;
            EXPECT_EQ(scales.Gpu(), scales.Cpu()) << what;
          }
        }
      }
    }
  }
}

// The tiled transposed quantization over several 32 x 32 tiles and 256-row amax chunks, ending
// inside both: the CPU's bytes.
TEST_F(CudaComputeTest, Float8TransposedQuantizeAcrossTilesMatchesTheCpu) {
  const int64_t rows = 600, columns = 97;
  const std::vector<float> values = Random(rows * columns, 175, 12.0f);
  for (bool bf16 : {false, true}) {
    Twin x = bf16 ? Bf16(values, {rows, columns}) : F32(values, {rows, columns});
    for (Float8Granularity granularity : {Float8Granularity::kTensor, Float8Granularity::kRow}) {
      const bool per_row = granularity == Float8Granularity::kRow;
      const Float8Scaling scaling{granularity, false, true, {}};
      Twin out = Zeros(DType::kF8E4M3, {columns, rows});
      Twin scales = Zeros(DType::kF32, {per_row ? columns : 1});
      BOTH(cpu_.Float8Quantize(x.cpu(), scaling, out.cpu(), scales.cpu()),
           gpu_->Float8Quantize(x.gpu(), scaling, out.gpu(), scales.gpu()));
      const std::string what = absl::StrCat(bf16 ? "bf16" : "f32", per_row ? " row" : " tensor");
      EXPECT_EQ(out.GpuBytes(), out.CpuBytes()) << what;
      EXPECT_EQ(scales.Gpu(), scales.Cpu()) << what;
      Twin amax = Zeros(DType::kF32, {per_row ? columns : 1});
      BOTH(cpu_.Float8Amax(x.cpu(), scaling, amax.cpu()),
           gpu_->Float8Amax(x.gpu(), scaling, amax.gpu()));
      EXPECT_EQ(amax.Gpu(), amax.Cpu()) << what;
    }
  }
}

// fsdp's float8 all-gather: AbsMax over many tensors, quantization by a given amax, and the
// transposed codes of the gathered weight, each byte for byte the CPU's.
TEST_F(CudaComputeTest, AbsMaxGivenAmaxQuantizeAndTransposeMatchTheCpu) {
  std::vector<float> values = Random(24 * 40, 190, 9.0f);
  Twin a = F32(values, {24, 40}), b = Bf16(Random(100, 191, 0.3f), {100}), empty = F32({}, {0});
  Twin amax = Zeros(DType::kF32, {3});
  const std::vector<TensorView> cpu_tensors = {a.cpu(), b.cpu(), empty.cpu()};
  const std::vector<TensorView> gpu_tensors = {a.gpu(), b.gpu(), empty.gpu()};
  BOTH(cpu_.AbsMax(cpu_tensors, amax.cpu()), gpu_->AbsMax(gpu_tensors, amax.gpu()));
  EXPECT_EQ(amax.Gpu(), amax.Cpu());
  // The first 8 rows quantized by the whole tensor's amax (that of `a`, amax[0]).
  Twin rows = F32(std::vector<float>(values.begin(), values.begin() + 8 * 40), {8, 40});
  Twin given = F32({amax.Cpu()[0]}, {1});
  Twin codes = Zeros(DType::kF8E4M3, {8, 40}), scale = Zeros(DType::kF32, {1});
  BOTH(cpu_.Float8Quantize(rows.cpu(), {Float8Granularity::kTensor, false, false, given.cpu()},
                           codes.cpu(), scale.cpu()),
       gpu_->Float8Quantize(rows.gpu(), {Float8Granularity::kTensor, false, false, given.gpu()},
                            codes.gpu(), scale.gpu()));
  EXPECT_EQ(codes.GpuBytes(), codes.CpuBytes());
  EXPECT_EQ(scale.Gpu(), scale.Cpu());
  Twin code_source(DType::kF8E4M3, {8, 40}, codes.CpuBytes().data());
  Twin moved = Zeros(DType::kF8E4M3, {40, 8});
  BOTH(cpu_.Transpose(code_source.cpu(), moved.cpu()),
       gpu_->Transpose(code_source.gpu(), moved.gpu()));
  EXPECT_EQ(moved.GpuBytes(), moved.CpuBytes());
  Twin wide = Zeros(DType::kF32, {40, 24});
  BOTH(cpu_.Transpose(a.cpu(), wide.cpu()), gpu_->Transpose(a.gpu(), wide.gpu()));
  EXPECT_EQ(wide.Gpu(), wide.Cpu());
}

// The encoding itself at its edges (on sm_89+ the GPU's own conversion): NaN, infinities, signed
// zeros, values past the largest finite, ties between two codes, e4m3's and e5m2's subnormals and
// below, quantized by a given amax of each format's largest finite (a scale of 1): the CPU's
// bytes, both ways round.
TEST_F(CudaComputeTest, Float8EncodingAtItsEdgesWritesTheCpusBytes) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> values = {
      std::nanf(""), -std::nanf(""), inf,        -inf,    0.0f,    -0.0f,     448.0f,
      449.0f,        464.0f,         465.0f,     1e9f,    -1e9f,   57344.0f,  61440.0f,
      1.0625f,       1.1875f,        -1.0625f,   0x1p-7f, 0x1p-9f, 0x1.8p-9f, 0x1p-10f,
      0x1.1p-10f,    0x1p-16f,       0x1.8p-17f, 1e-40f,  -1e-40f, 3.0e-3f};
  for (int i = 0; i < 37; ++i) values.push_back(std::ldexp(1.0f + i / 37.0f, i % 24 - 12));
  for (DType format : {DType::kF8E4M3, DType::kF8E5M2}) {
    for (bool transpose : {false, true}) {
      Twin x = F32(values, {8, 8});
      Twin given = F32({format == DType::kF8E4M3 ? 448.0f : 57344.0f}, {1});
      Twin codes = Zeros(format, {8, 8}), scale = Zeros(DType::kF32, {1});
      const Float8Scaling cpu_scaling{Float8Granularity::kTensor, false, transpose, given.cpu()};
      const Float8Scaling gpu_scaling{Float8Granularity::kTensor, false, transpose, given.gpu()};
      BOTH(cpu_.Float8Quantize(x.cpu(), cpu_scaling, codes.cpu(), scale.cpu()),
           gpu_->Float8Quantize(x.gpu(), gpu_scaling, codes.gpu(), scale.gpu()));
      EXPECT_EQ(codes.GpuBytes(), codes.CpuBytes())
          << DTypeName(format) << (transpose ? " transposed" : "");
    }
  }
}

// Tensor parallelism's pieces of a Float8 operand: Float8Amax of the tensor and of each row of
// out (transposed or not), and a rowwise quantization by given amaxes, each the CPU's bytes.
TEST_F(CudaComputeTest, Float8AmaxAndRowwiseGivenAmaxMatchTheCpu) {
  const int64_t rows = 24, columns = 40;
  const std::vector<float> values = Random(rows * columns, 192, 7.0f);
  for (bool bf16 : {false, true}) {
    Twin x = bf16 ? Bf16(values, {rows, columns}) : F32(values, {rows, columns});
    for (Float8Granularity granularity : {Float8Granularity::kTensor, Float8Granularity::kRow}) {
      for (bool transpose : {false, true}) {
        const bool per_row = granularity == Float8Granularity::kRow;
        const int64_t out_rows = transpose ? columns : rows, count = per_row ? out_rows : 1;
        const std::string what = absl::StrCat(bf16 ? "bf16" : "f32", per_row ? " row" : " tensor",
                                              transpose ? " transposed" : "");
        Twin amax = Zeros(DType::kF32, {count});
        Float8Scaling scaling{granularity, per_row, transpose, {}};
        BOTH(cpu_.Float8Amax(x.cpu(), scaling, amax.cpu()),
             gpu_->Float8Amax(x.gpu(), scaling, amax.gpu()));
        EXPECT_EQ(amax.Gpu(), amax.Cpu()) << what;
        // Twice the amaxes: other codes than x's own would give, the same on both.
        std::vector<float> doubled = amax.Cpu();
        for (float& v : doubled) v *= 2.0f;
        Twin given = F32(doubled, {count});
        Twin codes = Zeros(DType::kF8E4M3, transpose ? std::vector<int64_t>{columns, rows}
                                                     : std::vector<int64_t>{rows, columns});
        Twin scales = Zeros(DType::kF32, {count});
        Float8Scaling cpu_scaling = scaling, gpu_scaling = scaling;
        cpu_scaling.amax = given.cpu();
        gpu_scaling.amax = given.gpu();
        BOTH(cpu_.Float8Quantize(x.cpu(), cpu_scaling, codes.cpu(), scales.cpu()),
             gpu_->Float8Quantize(x.gpu(), gpu_scaling, codes.gpu(), scales.gpu()));
        EXPECT_EQ(codes.GpuBytes(), codes.CpuBytes()) << what;
        EXPECT_EQ(scales.Gpu(), scales.Cpu()) << what;
      }
    }
  }
}

// FP8 codes decode exactly and their products are exact in f32, but Hopper's FP8 tensor cores
// keep fewer bits while they accumulate (about 14 in a block of k, DeepSeek-V3 measured): 1e-5
// relative plus 5e-4 of the largest |c| absolute. A wrong scale or layout is off by O(|c|).
TEST_F(CudaComputeTest, Float8GemmMatchesTheCpu) {
  const int64_t m = 32, n = 48, k = 64;
  for (DType format_b : {DType::kF8E4M3, DType::kF8E5M2}) {
    for (bool per_row : {false, true}) {
      Twin xa = F32(Random(m * k, 180, 5.0f), {m, k}), xb = F32(Random(n * k, 181), {n, k});
      const Float8Scaling scaling{
          per_row ? Float8Granularity::kRow : Float8Granularity::kTensor, false, false, {}};
      Twin a = Zeros(DType::kF8E4M3, {m, k}), b = Zeros(format_b, {n, k});
      Twin sa = Zeros(DType::kF32, {per_row ? m : 1}), sb = Zeros(DType::kF32, {per_row ? n : 1});
      ASSERT_TRUE(cpu_.Float8Quantize(xa.cpu(), scaling, a.cpu(), sa.cpu()).ok());
      ASSERT_TRUE(cpu_.Float8Quantize(xb.cpu(), scaling, b.cpu(), sb.cpu()).ok());
      Twin a_codes(DType::kF8E4M3, {m, k}, a.CpuBytes().data());
      Twin b_codes(format_b, {n, k}, b.CpuBytes().data());
      Twin sa_ref = F32(sa.Cpu(), {per_row ? m : 1}), sb_ref = F32(sb.Cpu(), {per_row ? n : 1});
      Twin c = F32(Random(m * n, 182), {m, n});
      BOTH(cpu_.Float8Gemm(a_codes.cpu(), sa_ref.cpu(), b_codes.cpu(), sb_ref.cpu(), 1.0f, 0.5f,
                           c.cpu()),
           gpu_->Float8Gemm(a_codes.gpu(), sa_ref.gpu(), b_codes.gpu(), sb_ref.gpu(), 1.0f, 0.5f,
                            c.gpu()));
      const std::vector<float> cpu = c.Cpu();
      float largest = 0;
      for (float x : cpu) largest = std::max(largest, std::fabs(x));
      ExpectNear(c.Gpu(), cpu, 1e-5, 5e-4 * largest,
                 absl::StrCat("c ", DTypeName(format_b), per_row ? " row" : " tensor"));
    }
  }
}

// Routing: the experts the CPU chooses (the f64 exponentials may round apart in the last place
// of a score, but not so as to swap random logits), weights and gradients within 1e-6.
TEST_F(CudaComputeTest, MoeRouteAndItsBackwardMatchTheCpu) {
  const int64_t n = 517, e = 64;
  const std::vector<MoeRouting> routings = {
      {.score = MoeRouting::Score::kSoftmax, .top_k = 8},
      {.score = MoeRouting::Score::kSigmoid,
       .top_k = 6,
       .scale = 2.5f,
       .groups = 8,
       .groups_chosen = 4},
  };
  Twin logits = F32(Random(n * e, 190, 2.0f), {n, e}), bias = F32(Random(e, 191, 0.1f), {e});
  for (const MoeRouting& routing : routings) {
    const int64_t k = routing.top_k;
    Twin experts = Zeros(DType::kI32, {n, k}), weights = Zeros(DType::kF32, {n, k});
    BOTH(cpu_.MoeRoute(logits.cpu(), bias.cpu(), routing, experts.cpu(), weights.cpu()),
         gpu_->MoeRoute(logits.gpu(), bias.gpu(), routing, experts.gpu(), weights.gpu()));
    EXPECT_EQ(experts.Gpu(), experts.Cpu());
    ExpectNear(weights.Gpu(), weights.Cpu(), 1e-6, 0, "MoeRoute weights");
    Twin d_weights = F32(Random(n * k, 192), {n, k}), d_logits = Zeros(DType::kF32, {n, e});
    BOTH(cpu_.MoeRouteBackward(logits.cpu(), experts.cpu(), d_weights.cpu(), routing,
                               d_logits.cpu()),
         gpu_->MoeRouteBackward(logits.gpu(), experts.gpu(), d_weights.gpu(), routing,
                                d_logits.gpu()));
    ExpectNear(d_logits.Gpu(), d_logits.Cpu(), 1e-5, 1e-9, "MoeRouteBackward d_logits");
  }
}

// The permutation, dispatch, combine and their gradients: the CPU's results bit for bit, over
// several tiles of assignments, with an expert that gets none; an expert id out of range is
// reported as the CPU reports it.
TEST_F(CudaComputeTest, MoePermuteDispatchAndCombineMatchTheCpuExactly) {
  const int64_t n = 700, k = 4, m = n * k, d = 99, e = 33;
  std::mt19937 rng(193);
  std::vector<int32_t> ids(m);
  for (int32_t& id : ids) id = static_cast<int32_t>(rng() % (e - 1));
  Twin experts(DType::kI32, {n, k}, ids.data());
  Twin counts = Zeros(DType::kI32, {e}), slots = Zeros(DType::kI32, {m});
  BOTH(cpu_.MoePermute(experts.cpu(), counts.cpu(), slots.cpu()),
       gpu_->MoePermute(experts.gpu(), counts.gpu(), slots.gpu()));
  EXPECT_EQ(counts.Gpu(), counts.Cpu());
  EXPECT_EQ(slots.Gpu(), slots.Cpu());
  const std::vector<float> x_values = Random(n * d, 194);
  Twin x = F32(x_values, {n, d}), rows = Zeros(DType::kF32, {m, d});
  Twin x16 = Bf16(x_values, {n, d}), rows16 = Zeros(DType::kBF16, {m, d});
  BOTH(cpu_.MoeDispatch(x.cpu(), slots.cpu(), rows.cpu()),
       gpu_->MoeDispatch(x.gpu(), slots.gpu(), rows.gpu()));
  BOTH(cpu_.MoeDispatch(x16.cpu(), slots.cpu(), rows16.cpu()),
       gpu_->MoeDispatch(x16.gpu(), slots.gpu(), rows16.gpu()));
  EXPECT_EQ(rows.Gpu(), rows.Cpu());
  EXPECT_EQ(rows16.GpuBytes(), rows16.CpuBytes());
  Twin d_rows = F32(Random(m * d, 195), {m, d}), dx = F32(Random(n * d, 196), {n, d});
  BOTH(cpu_.MoeDispatchBackward(d_rows.cpu(), slots.cpu(), dx.cpu()),
       gpu_->MoeDispatchBackward(d_rows.gpu(), slots.gpu(), dx.gpu()));
  EXPECT_EQ(dx.Gpu(), dx.Cpu());
  Twin y = F32(Random(m * d, 197), {m, d}), weights = F32(Random(m, 198), {n, k});
  Twin out = F32(Random(n * d, 199), {n, d});
  BOTH(cpu_.MoeCombine(y.cpu(), weights.cpu(), slots.cpu(), out.cpu()),
       gpu_->MoeCombine(y.gpu(), weights.gpu(), slots.gpu(), out.gpu()));
  EXPECT_EQ(out.Gpu(), out.Cpu());
  Twin d_out = F32(Random(n * d, 200), {n, d});
  Twin d_y = Zeros(DType::kF32, {m, d}), d_weights = Zeros(DType::kF32, {n, k});
  BOTH(cpu_.MoeCombineBackward(d_out.cpu(), y.cpu(), weights.cpu(), slots.cpu(), d_y.cpu(),
                               d_weights.cpu()),
       gpu_->MoeCombineBackward(d_out.gpu(), y.gpu(), weights.gpu(), slots.gpu(), d_y.gpu(),
                                d_weights.gpu()));
  EXPECT_EQ(d_y.Gpu(), d_y.Cpu());
  EXPECT_EQ(d_weights.Gpu(), d_weights.Cpu());

  ids[1234] = e;
  Twin bad(DType::kI32, {n, k}, ids.data());
  const absl::Status cpu_status = cpu_.MoePermute(bad.cpu(), counts.cpu(), slots.cpu());
  EXPECT_EQ(cpu_status.message(),
            "MoePermute: operand 'experts' holds expert 33 at assignment "
            "1234, outside [0, 33)");
  EXPECT_EQ(gpu_->MoePermute(bad.gpu(), counts.gpu(), slots.gpu()), cpu_status);
}

}  // namespace
}  // namespace titan
