#include "core/cpu/cpu_device.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace titan {
namespace {

TEST(CpuDevice, AllocatesAlignedMemoryAndTracksThePeak) {
  CpuDevice device;
  auto a = device.Allocate(1000);
  auto b = device.Allocate(3);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*a) % CpuDevice::kAlignment, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*b) % CpuDevice::kAlignment, 0u);
  auto info = device.MemoryInfo();
  ASSERT_TRUE(info.ok());
  EXPECT_GE(info->peak_allocated_bytes, 1003u);
  EXPECT_GT(info->total_bytes, 0u);
  ASSERT_TRUE(device.Free(*a).ok());
  ASSERT_TRUE(device.Free(*b).ok());
  EXPECT_GE(device.MemoryInfo()->peak_allocated_bytes, 1003u);
}

TEST(CpuDevice, CopiesAndFills) {
  CpuDevice device;
  std::vector<float> host = {1, 2, 3};
  auto memory = device.Allocate(3 * sizeof(float));
  ASSERT_TRUE(memory.ok());
  float* dev = static_cast<float*>(*memory);
  ASSERT_TRUE(device.CopyToDevice(dev, host.data(), 3 * sizeof(float)).ok());
  std::vector<float> back(3);
  ASSERT_TRUE(device.CopyToHost(back.data(), dev, 3 * sizeof(float)).ok());
  EXPECT_EQ(back, host);
  ASSERT_TRUE(device.FillF32(dev, 3, 2.5f).ok());
  ASSERT_TRUE(device.CopyToHost(back.data(), dev, 3 * sizeof(float)).ok());
  EXPECT_EQ(back, (std::vector<float>{2.5f, 2.5f, 2.5f}));
  EXPECT_TRUE(device.Free(dev).ok());
  EXPECT_FALSE(device.Select(1).ok());
}

}  // namespace
}  // namespace titan
