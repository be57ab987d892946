#include <gtest/gtest.h>

#include <vector>

#include "core/runtime/plugin_registry.h"
#include "tests/support/plugin_dir.h"
#include "titan/device.h"

namespace titan {
namespace {

std::unique_ptr<DevicePlugin> LoadCudaDevice() {
  static auto registry = std::move(PluginRegistry::Discover({testing::TestPluginDir()})).value();
  return std::move(registry->Create<DevicePlugin>("cuda")).value();
}

TEST(CudaDevice, WithoutAGpuEveryCallExplainsItself) {
  auto device = LoadCudaDevice();
  if (device->DeviceCount() > 0)
    GTEST_SKIP() << "a CUDA device is present; this checks its absence";
  auto memory = device->Allocate(1024);
  ASSERT_FALSE(memory.ok());
  EXPECT_NE(memory.status().message().find("cuda: cudaMalloc failed: cuda"),
            absl::string_view::npos)
      << memory.status();
  auto select = device->Select(0);
  EXPECT_EQ(select.message(), "cuda: device 0 does not exist; 0 CUDA device(s) are visible");
}

TEST(CudaDevice, AllocatesCopiesAndFillsOnTheGpu) {
  auto device = LoadCudaDevice();
  if (device->DeviceCount() == 0) GTEST_SKIP() << "no CUDA device on this machine";
  ASSERT_TRUE(device->Select(0).ok());
  const size_t n = 1 << 20;
  auto memory = device->Allocate(n * sizeof(float));
  ASSERT_TRUE(memory.ok()) << memory.status();
  float* gpu = static_cast<float*>(*memory);
  std::vector<float> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = static_cast<float>(i);
  ASSERT_TRUE(device->CopyToDevice(gpu, host.data(), n * sizeof(float)).ok());
  std::vector<float> back(n);
  ASSERT_TRUE(device->CopyToHost(back.data(), gpu, n * sizeof(float)).ok());
  EXPECT_EQ(back, host);
  ASSERT_TRUE(device->FillF32(gpu + 1, n - 2, -3.5f).ok());
  ASSERT_TRUE(device->Synchronize().ok());
  ASSERT_TRUE(device->CopyToHost(back.data(), gpu, n * sizeof(float)).ok());
  EXPECT_EQ(back[0], 0.0f);
  EXPECT_EQ(back[1], -3.5f);
  EXPECT_EQ(back[n - 2], -3.5f);
  EXPECT_EQ(back[n - 1], static_cast<float>(n - 1));
  auto info = device->MemoryInfo();
  ASSERT_TRUE(info.ok());
  EXPECT_GE(info->peak_allocated_bytes, n * sizeof(float));
  EXPECT_GT(info->total_bytes, info->free_bytes);
  EXPECT_TRUE(device->Free(gpu).ok());
}

}  // namespace
}  // namespace titan
