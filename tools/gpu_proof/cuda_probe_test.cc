#include "tools/gpu_proof/cuda_probe.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

namespace titan::gpu_proof {
namespace {

using ::testing::HasSubstr;

class CudaProbeTest : public ::testing::Test {
 protected:
  void TearDown() override {
    unsetenv("TITAN_FAKE_CUDA_DEVICES");
    unsetenv("TITAN_FAKE_CUDA_INIT_ERROR");
  }
};

TEST_F(CudaProbeTest, ListsEveryDeviceWithItsNameAndComputeCapability) {
  setenv("TITAN_FAKE_CUDA_DEVICES", "2", 1);
  CudaProbe probe = ProbeCuda(TITAN_FAKE_CUDA);
  ASSERT_EQ(probe.devices.size(), 2u) << probe.note;
  EXPECT_EQ(probe.devices[0].name, "NVIDIA H200 #0");
  EXPECT_EQ(probe.devices[1].name, "NVIDIA H200 #1");
  EXPECT_EQ(probe.devices[1].compute_capability, "9.0");
  EXPECT_EQ(probe.driver, "13.0");
}

TEST_F(CudaProbeTest, AFailedInitIsNoDeviceWithTheDriversError) {
  setenv("TITAN_FAKE_CUDA_INIT_ERROR", "100", 1);
  CudaProbe probe = ProbeCuda(TITAN_FAKE_CUDA);
  EXPECT_TRUE(probe.devices.empty());
  EXPECT_THAT(probe.note, HasSubstr("cuInit failed with CUresult 100 (no CUDA-capable device)"));
}

TEST_F(CudaProbeTest, ADriverShowingNoDeviceIsNoDevice) {
  setenv("TITAN_FAKE_CUDA_DEVICES", "0", 1);
  CudaProbe probe = ProbeCuda(TITAN_FAKE_CUDA);
  EXPECT_TRUE(probe.devices.empty());
  EXPECT_THAT(probe.note, HasSubstr("no device"));
}

TEST_F(CudaProbeTest, NoDriverIsNoDeviceNamingTheLibrary) {
  CudaProbe probe = ProbeCuda("/nonexistent/libcuda.so.1");
  EXPECT_TRUE(probe.devices.empty());
  EXPECT_THAT(probe.note, HasSubstr("cannot load /nonexistent/libcuda.so.1"));
}

}  // namespace
}  // namespace titan::gpu_proof
