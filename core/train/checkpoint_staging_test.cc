#include "core/train/checkpoint_staging.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "tests/support/scrambled_device.h"

namespace titan {
namespace {

using testing_support::Scrambled;
using testing_support::ScrambledCompute;

// Every byte value, so a piece that is not staged (read scrambled) or staged wrongly shows.
std::vector<unsigned char> AllBytes(size_t n) {
  std::vector<unsigned char> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<unsigned char>(i * 7 + 3);
  return bytes;
}

CheckpointPiece DevicePiece(const char* name, std::vector<unsigned char>& bytes) {
  const int64_t n = static_cast<int64_t>(bytes.size() / sizeof(float));
  return {
      name, {n}, {0}, TensorView{bytes.data(), DType::kF32, Device{DeviceType::kCuda, 0}, {n}, {}}};
}

TEST(CheckpointStagingTest, SaveCopiesDevicePiecesToTheHostAndLeavesHostPieces) {
  ScrambledCompute compute;
  const std::vector<unsigned char> weights = AllBytes(1024);
  std::vector<unsigned char> on_device = Scrambled(weights);
  std::vector<int64_t> step = {42};
  std::vector<CheckpointPiece> pieces = {
      DevicePiece("model/w", on_device),
      {"train/step", {1}, {0}, TensorView{step.data(), DType::kI64, Device{}, {1}, {}}}};
  std::vector<std::vector<char>> owned;
  ASSERT_TRUE(StagePiecesToHost(compute, pieces, owned).ok());
  EXPECT_EQ(pieces[0].data.device.type, DeviceType::kCpu);
  EXPECT_NE(pieces[0].data.data, on_device.data());
  const auto* staged = static_cast<const unsigned char*>(pieces[0].data.data);
  EXPECT_EQ(std::vector<unsigned char>(staged, staged + weights.size()), weights);
  EXPECT_EQ(pieces[1].data.data, step.data());  // host pieces go as they are
  EXPECT_EQ(compute.copies, 1);
}

TEST(CheckpointStagingTest, LoadFillsHostBuffersThenTheDevice) {
  ScrambledCompute compute;
  const std::vector<unsigned char> saved = AllBytes(512);
  std::vector<unsigned char> on_device(saved.size(), 0);
  std::vector<CheckpointPiece> pieces = {DevicePiece("optimizer/exp_avg/w", on_device)};
  LoadStaging staging;
  ASSERT_TRUE(staging.Prepare(compute, pieces).ok());
  ASSERT_EQ(pieces[0].data.device.type, DeviceType::kCpu);
  // What a checkpoint plugin does: write the host bytes it was handed.
  std::memcpy(pieces[0].data.data, saved.data(), saved.size());
  ASSERT_TRUE(staging.Finish().ok());
  EXPECT_EQ(on_device, Scrambled(saved));  // the device's own copy put them there
}

TEST(CheckpointStagingTest, SaveThenLoadRoundTripsEveryByte) {
  ScrambledCompute compute;
  const std::vector<unsigned char> original = Scrambled(AllBytes(4096));
  std::vector<unsigned char> device_a = original, device_b(original.size(), 0);
  std::vector<CheckpointPiece> save = {DevicePiece("model/w", device_a)};
  std::vector<std::vector<char>> owned;
  ASSERT_TRUE(StagePiecesToHost(compute, save, owned).ok());
  std::vector<CheckpointPiece> load = {DevicePiece("model/w", device_b)};
  LoadStaging staging;
  ASSERT_TRUE(staging.Prepare(compute, load).ok());
  std::memcpy(load[0].data.data, save[0].data.data, original.size());
  ASSERT_TRUE(staging.Finish().ok());
  EXPECT_EQ(device_b, original);
}

}  // namespace
}  // namespace titan
