// The Float8 quantization kernels' own code, run on the CPU by cuda_emulation.h, byte for byte
// against CpuCompute: the tiled transposed quantization and the amax passes at shapes that end
// inside a tile and span several amax chunks, each fiber order giving the same bytes.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/cpu/cpu_compute.h"
#include "titan/float16.h"

// The emulation redefines CUDA's qualifiers: it comes after every other header but the kernels'.
#include "cuda_emulation.h"
// The kernels, compiled for the emulation.
#include "float8_kernels.cuh"

namespace titan::cuda {
namespace {

std::vector<float> Random(int64_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = normal(rng);
  return x;
}

struct Input {
  std::vector<float> f32;
  std::vector<uint16_t> bf16;
  bool is_bf16;
  int64_t rows, columns;
  TensorView view() {
    void* data = is_bf16 ? static_cast<void*>(bf16.data()) : static_cast<void*>(f32.data());
    return TensorView{data, is_bf16 ? DType::kBF16 : DType::kF32, Device{}, {rows, columns}, {}};
  }
};

Input MakeInput(int64_t rows, int64_t columns, bool bf16, uint32_t seed) {
  Input x{Random(rows * columns, seed, 20.0f), {}, bf16, rows, columns};
  if (!x.f32.empty()) x.f32[x.f32.size() / 2] = 0.0f;
  for (float v : x.f32) x.bf16.push_back(F32ToBf16(v));
  return x;
}

Float8QuantizeArgs ArgsOf(Input& x, const Float8Scaling& scaling, DType format, uint8_t* codes,
                          float* inverse_scales, float* amax) {
  return Float8QuantizeArgs{x.view().data,
                            x.is_bf16,
                            x.rows,
                            x.columns,
                            scaling.transpose,
                            scaling.granularity == Float8Granularity::kRow,
                            scaling.power_of_two,
                            format == DType::kF8E4M3 ? Float8Format::kE4M3 : Float8Format::kE5M2,
                            codes,
                            inverse_scales,
                            amax,
                            scaling.amax.data != nullptr};
}

void CompareQuantize(int64_t rows, int64_t columns, bool bf16, DType format,
                     Float8Granularity granularity, bool transpose, bool power_of_two,
                     bool given_amax, uint32_t seed) {
  const bool per_row = granularity == Float8Granularity::kRow;
  const int64_t out_rows = transpose ? columns : rows;
  const int64_t scales = per_row ? out_rows : 1;
  SCOPED_TRACE(absl::StrCat(rows, " x ", columns, bf16 ? " bf16 " : " f32 ", DTypeName(format),
                            per_row ? " row" : " tensor", transpose ? " transposed" : "",
                            power_of_two ? " pow2" : "", given_amax ? " given amax" : ""));
  Input x = MakeInput(rows, columns, bf16, seed);
  std::vector<float> given = Random(scales, seed + 1, 30.0f);
  for (float& v : given) v = std::fabs(v) + 1.0f;
  Float8Scaling scaling{granularity, power_of_two, transpose, {}};
  if (given_amax) scaling.amax = FlatF32(given.data(), scales);
  std::vector<uint8_t> cpu_codes(rows * columns), codes(rows * columns, 0xee);
  std::vector<float> cpu_scales(scales), inverse(scales, -1.0f);
  const std::vector<int64_t> out_shape =
      transpose ? std::vector<int64_t>{columns, rows} : std::vector<int64_t>{rows, columns};
  ASSERT_TRUE(CpuCompute::Get()
                  .Float8Quantize(x.view(), scaling,
                                  TensorView{cpu_codes.data(), format, Device{}, out_shape, {}},
                                  FlatF32(cpu_scales.data(), scales))
                  .ok());
  for (bool reverse : {false, true}) {
    emulation::set_reverse_order(reverse);
    std::vector<float> amax = given_amax ? given : std::vector<float>(scales, -5.0f);
    ASSERT_EQ(float8::RunQuantize(emulation::Launcher{}, ArgsOf(x, scaling, format, codes.data(),
                                                                inverse.data(), amax.data())),
              cudaSuccess);
    EXPECT_EQ(codes, cpu_codes) << (reverse ? "fibers last to first" : "fibers first to last");
    EXPECT_EQ(inverse, cpu_scales);
  }
  emulation::set_reverse_order(false);
}

TEST(Float8KernelsOnTheCpu, QuantizeWritesTheCpusBytesAtEveryScaling) {
  uint32_t seed = 10;
  for (bool bf16 : {false, true}) {
    for (DType format : {DType::kF8E4M3, DType::kF8E5M2}) {
      for (Float8Granularity granularity : {Float8Granularity::kTensor, Float8Granularity::kRow}) {
        for (bool transpose : {false, true}) {
          for (bool given : {false, true}) {
            CompareQuantize(45, 70, bf16, format, granularity, transpose, bf16, given, seed++);
          }
        }
      }
    }
  }
}

// Several 32 x 32 tiles and several amax chunks of 256 rows, ending inside both.
TEST(Float8KernelsOnTheCpu, TransposedQuantizeAcrossTilesAndAmaxChunks) {
  for (Float8Granularity granularity : {Float8Granularity::kTensor, Float8Granularity::kRow}) {
    CompareQuantize(600, 97, false, DType::kF8E4M3, granularity, true, false, false, 40);
    CompareQuantize(33, 300, true, DType::kF8E4M3, granularity, true, true, false, 41);
  }
  CompareQuantize(1, 1, false, DType::kF8E4M3, Float8Granularity::kRow, true, false, false, 42);
}

TEST(Float8KernelsOnTheCpu, AmaxOfTheTensorAndOfEachRowOfOutMatchTheCpu) {
  for (bool transpose : {false, true}) {
    for (Float8Granularity granularity : {Float8Granularity::kTensor, Float8Granularity::kRow}) {
      Input x = MakeInput(300, 45, true, 50);
      x.f32[7] = std::nanf("");
      x.bf16[7] = F32ToBf16(x.f32[7]);
      const bool per_row = granularity == Float8Granularity::kRow;
      const int64_t count = per_row ? (transpose ? 45 : 300) : 1;
      const Float8Scaling scaling{granularity, false, transpose, {}};
      std::vector<float> cpu(count), amax(count, -1.0f);
      ASSERT_TRUE(CpuCompute::Get().Float8Amax(x.view(), scaling, FlatF32(cpu.data(), count)).ok());
      ASSERT_EQ(float8::RunAmax(emulation::Launcher{},
                                ArgsOf(x, scaling, DType::kF8E4M3, nullptr, nullptr, amax.data())),
                cudaSuccess);
      for (int64_t i = 0; i < count; ++i) {
        if (std::isnan(cpu[i])) {
          EXPECT_TRUE(std::isnan(amax[i])) << i;
        } else {
          EXPECT_EQ(amax[i], cpu[i]) << i << (transpose ? " transposed" : "");
        }
      }
    }
  }
}

}  // namespace
}  // namespace titan::cuda
