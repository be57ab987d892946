#include "core/runtime/profiled_compute.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/support/scrambled_device.h"

namespace titan {
namespace {

namespace fs = std::filesystem;

// A stand-in device's compute that counts how often the host waited for it.
class CountingCompute : public testing_support::ScrambledCompute {
 public:
  absl::Status Synchronize() override {
    ++synchronized;
    return absl::OkStatus();
  }
  int synchronized = 0;
};

class ProfiledComputeTest : public testing::Test {
 protected:
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_ = fs::temp_directory_path() / absl::StrCat("titan_profiled_compute_", getpid());
  CountingCompute inner_;
  ProfiledCompute compute_{inner_};
  std::vector<float> memory_ = std::vector<float>(4);
  TensorView x_{memory_.data(), DType::kF32, Device{DeviceType::kCuda, 0}, {4}, {}};
};

TEST_F(ProfiledComputeTest, ForwardsEveryKernelAndWaitsForNothingOutsideAProfiledStep) {
  ASSERT_TRUE(compute_.Fill(x_, 2.5f).ok());
  EXPECT_EQ(memory_, std::vector<float>(4, 2.5f));  // the stand-in computes on host memory
  std::vector<float> host = {1, 2, 3, 4};
  ASSERT_TRUE(compute_.CopyFromHost(host.data(), x_).ok());
  EXPECT_EQ(inner_.copies, 1);
  EXPECT_EQ(inner_.synchronized, 0);
  EXPECT_EQ(compute_.device().type, DeviceType::kCuda);
  EXPECT_EQ(compute_.Describe(), inner_.Describe());
  // The table's operand check still runs: an f16 view is refused by Fill (f32 or bf16).
  TensorView f16 = x_;
  f16.dtype = DType::kF16;
  EXPECT_EQ(compute_.Fill(f16, 1.0f).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ProfiledComputeTest, InAProfiledStepEachKernelIsTimedBetweenTwoWaits) {
  Profiler profiler(1, dir_.string(), 0);
  ASSERT_TRUE(profiler.BeginStep(1));
  ASSERT_TRUE(compute_.Fill(x_, 1.0f).ok());
  ASSERT_TRUE(compute_.Scale(x_, 3.0f).ok());
  EXPECT_EQ(inner_.synchronized, 4);
  absl::StatusOr<std::string> path = profiler.EndStep(1);
  ASSERT_TRUE(path.ok()) << path.status();
  std::ifstream in(*path);
  const nlohmann::json trace = nlohmann::json::parse(in);
  int fills = 0, scales = 0;
  for (const auto& event : trace["traceEvents"]) {
    if (event["ph"] != "X" || event["cat"] != "kernel") continue;
    fills += event["name"] == "Fill";
    scales += event["name"] == "Scale";
  }
  // The wrapper's span, and the stand-in's own (a CPU compute underneath traces itself).
  EXPECT_EQ(fills, 2);
  EXPECT_EQ(scales, 2);
}

}  // namespace
}  // namespace titan
