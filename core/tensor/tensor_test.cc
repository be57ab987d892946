#include "core/tensor/tensor.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/tensor/arena.h"
#include "core/tensor/dtype.h"

namespace titan {
namespace {

TEST(TensorTest, ZerosIsAlignedContiguousAndViewable) {
  auto tensor = Tensor::Zeros({3, 5}, DType::kBF16);
  ASSERT_TRUE(tensor.ok()) << tensor.status();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(tensor->raw_data()) % 64, 0u);
  EXPECT_EQ(tensor->nbytes(), 30u);
  EXPECT_EQ(tensor->strides(), (std::vector<int64_t>{5, 1}));
  const TensorView view = tensor->view();
  EXPECT_EQ(view.dtype, DType::kBF16);
  EXPECT_EQ(view.numel(), 15);
  EXPECT_TRUE(view.is_contiguous());
  EXPECT_EQ(tensor->data<uint16_t>()[14], 0);
}

TEST(TensorTest, ReshapeSharesBytesAndRejectsAnotherSize) {
  auto tensor = Tensor::Zeros({2, 6});
  ASSERT_TRUE(tensor.ok());
  auto reshaped = tensor->Reshape({3, 4});
  ASSERT_TRUE(reshaped.ok());
  reshaped->data<float>()[5] = 7;
  EXPECT_EQ(tensor->data<float>()[5], 7);
  auto bad = tensor->Reshape({5});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("12 elements"), absl::string_view::npos);
  EXPECT_FALSE(Tensor::Zeros({-1}).ok());
}

TEST(ArenaTest, NamedViewsShareOneAlignedAllocation) {
  ArenaPlan plan;
  ASSERT_TRUE(plan.Add("a", {3}).ok());
  ASSERT_TRUE(plan.Add("b", {2, 2}, DType::kBF16).ok());
  EXPECT_FALSE(plan.Add("a", {1}).ok());
  EXPECT_EQ(plan.total_bytes(), 128u);
  auto arena = Arena::Allocate(plan);
  ASSERT_TRUE(arena.ok());
  auto b = arena->Find("b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(static_cast<char*>(b->raw_data()) - static_cast<char*>(arena->at(0).raw_data()), 64);
  EXPECT_EQ(arena->flat_size(), 32u);
  EXPECT_FALSE(arena->Find("c").ok());
  // Contains: any byte of the allocation, padding included, and nothing past its end.
  const char* begin = static_cast<const char*>(arena->at(0).raw_data());
  EXPECT_TRUE(arena->Contains(begin));
  EXPECT_TRUE(arena->Contains(b->raw_data()));
  EXPECT_TRUE(arena->Contains(begin + 127));
  EXPECT_FALSE(arena->Contains(begin + 128));
  EXPECT_FALSE(arena->Contains(begin - 1));
  EXPECT_FALSE(Arena().Contains(begin));
}

TEST(DTypeTest, HalfFormatsRoundToNearestEven) {
  EXPECT_EQ(F32ToBf16(1.0f), 0x3f80);
  EXPECT_EQ(Bf16ToF32(F32ToBf16(1.00390625f)), 1.0f);       // tie: stays even
  EXPECT_EQ(Bf16ToF32(F32ToBf16(1.01171875f)), 1.015625f);  // tie: rounds up to even
  EXPECT_EQ(F32ToF16(1.0f), 0x3c00);
  EXPECT_EQ(F32ToF16(65504.0f), 0x7bff);
  EXPECT_EQ(F32ToF16(1e6f), 0x7c00);
  EXPECT_EQ(F16ToF32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(F16ToF32(F32ToF16(1.0f + std::ldexp(1.0f, -11))), 1.0f);
  EXPECT_EQ(F16ToF32(F32ToF16(-2.5f)), -2.5f);
}

TEST(DTypeTest, ConvertTensorChecksTypesAndSizes) {
  std::vector<float> src = {1.5f, -2.0f, 3.25f};
  std::vector<uint16_t> half(3);
  std::vector<float> back(3);
  ASSERT_TRUE(ConvertTensor(FlatF32(src.data(), 3), {half.data(), DType::kF16, {}, {3}, {}}).ok());
  ASSERT_TRUE(ConvertTensor({half.data(), DType::kF16, {}, {3}, {}}, FlatF32(back.data(), 3)).ok());
  EXPECT_EQ(back, src);
  EXPECT_FALSE(ConvertTensor(FlatF32(src.data(), 3), FlatF32(back.data(), 2)).ok());
  EXPECT_FALSE(ConvertTensor(FlatF32(src.data(), 3), {half.data(), DType::kI32, {}, {3}, {}}).ok());
}

// The vectorized casts against a rounding written another way (the dropped half-word compared
// with a half unit), over a stride through every f32 bit pattern and the edge cases: ties both
// ways, the largest finite values rounding to infinity, infinities, signalling and quiet NaNs.
TEST(DTypeTest, Bf16CastsOfWholeTensorsRoundEveryBitPatternToNearestEven) {
  std::vector<uint32_t> patterns = {0x00000000u, 0x80000000u, 0x3f808000u, 0x3f818000u,
                                    0x7f7fffffu, 0xff7fffffu, 0x7f7f8000u, 0x7f800000u,
                                    0xff800000u, 0x7f800001u, 0xff800001u, 0x7fc00000u,
                                    0x00008000u, 0x00018000u, 0x0000ffffu};
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 65521) patterns.push_back(bits);
  const int64_t n = static_cast<int64_t>(patterns.size());
  std::vector<float> src(n);
  std::memcpy(src.data(), patterns.data(), n * sizeof(float));
  std::vector<uint16_t> bf16(n);
  std::vector<float> back(n);
  ASSERT_TRUE(ConvertTensor(FlatF32(src.data(), n), {bf16.data(), DType::kBF16, {}, {n}, {}}).ok());
  ASSERT_TRUE(ConvertTensor({bf16.data(), DType::kBF16, {}, {n}, {}}, FlatF32(back.data(), n)).ok());
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = patterns[i];
    const bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
    uint32_t expected = bits >> 16;
    const uint32_t dropped = bits & 0xffffu;
    if (nan) {
      expected |= 0x40u;  // quieted, sign and payload's top kept
    } else if (dropped > 0x8000u || (dropped == 0x8000u && (expected & 1u) != 0)) {
      ++expected;  // carries into the exponent, up to infinity
    }
    ASSERT_EQ(bf16[i], expected) << std::hex << "f32 bits 0x" << bits;
    uint32_t widened;
    std::memcpy(&widened, &back[i], sizeof(widened));
    ASSERT_EQ(widened, expected << 16) << std::hex << "bf16 0x" << expected;
  }
}

}  // namespace
}  // namespace titan
